"""A toy fine-tuning task written as docs/adding-a-task.md says, touching no file of the project:
does a text name an animal? Its files are DATA_DIR/{train,dev,test}.txt, one `label<TAB>text`
line each (`yes` or `no`; the test file's labels are ignored)."""
