"""The pretraining-data pipeline on Apache Beam: the pipeline (`pipeline`), what its workers run
(`worker`) and the files it reads and writes (`files`)."""
