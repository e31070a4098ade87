"""Below everything else: the user-error type (`errors`), files and folders (`files`), checks of
values (`validation`), the cluster's identity (`cluster`) and quiet TensorFlow (`quiet`)."""
