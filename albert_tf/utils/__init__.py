"""Below everything else: the user-error type (`errors`); a path's filesystem (`files`) and the rules
on it: files written aside and renamed (`atomic`), globs (`patterns`), compression from the name
(`compression`), output folders (`output_dirs`), one run a folder (`locks`); checks of values
(`validation`), the cluster's identity (`cluster`) and quiet TensorFlow (`quiet`)."""
