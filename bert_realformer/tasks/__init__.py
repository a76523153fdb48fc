"""Fine-tuning tasks: data, features, losses and metrics for classification, SQuAD and Chinese MRC,
NER and multiple choice."""
