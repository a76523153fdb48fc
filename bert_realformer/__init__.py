"""What the packages and scripts of this project share: the error type for user mistakes
(`errors`), the scripts' runner (`cli`) and TFRecord writing without TensorFlow (`tfrecords`).
Importing any of them changes nothing global."""
