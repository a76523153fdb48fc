"""What every package and script of this project may import, and nothing here imports them:
the error types scripts end on, the one file I/O module and what is built on it (text files,
TFRecords without TensorFlow, run claims). Importing any of them changes nothing global."""
