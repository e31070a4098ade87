"""albert-presets: the released checkpoints that load by name, and the parameters of every size.

    albert-presets                 # name, size, parameters and source of each released checkpoint
    albert-presets --sizes         # the parameter table of each named size (AlbertConfig.named)

Each name loads wherever a preset is taken (`AlbertEncoder.from_preset("albert_base_v2")`,
`--preset`, `--init_checkpoint`): downloaded once, converted into the cache (docs/presets.md). The
counts come from `albert_tf.config.parameter_counts` (at once; the tests check it against built
models); `--build` builds each model and counts its variables instead (their shapes only: no
random weights are drawn, see `albert_tf.models.base.shapes_only`).
"""

from absl import flags

from albert_tf.cli.entry_point import run_main
from albert_tf.utils.errors import FlagError

FLAGS = flags.FlagValues()  # its own: other scripts define the same names (see entry_point)
flags.DEFINE_list("presets", None, "Names to list (default: all).", flag_values=FLAGS)
flags.DEFINE_bool("sizes", False, "List the named sizes (configs without weights) with their parameters by part.",
                  flag_values=FLAGS)
flags.DEFINE_bool("build", False, "Build each model and count its variables instead of computing the counts.",
                  flag_values=FLAGS)


def parameter_table(names, build: bool = False) -> list[dict]:
    """One row per preset; `build` builds each model and counts its variables."""
    from albert_tf.config import AlbertConfig, parameter_counts

    if not build:
        rows = []
        for name in names:
            config = AlbertConfig.named(name)
            rows.append({"size": name, "L": config.num_hidden_layers, "H": config.hidden_size,
                         "E": config.embedding_size, "sharing": config.sharing, **parameter_counts(config)})
        return rows
    import keras

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.models.base import shapes_only

    rows = []
    for name in names:
        config = AlbertConfig.named(name)
        with shapes_only():
            model = AlbertPretrainer(config)
            model.build()
        encoder = model.encoder
        projection = encoder.embeddings.projection
        rows.append(
            {
                "size": name,
                "L": config.num_hidden_layers,
                "H": config.hidden_size,
                "E": config.embedding_size,
                "sharing": config.sharing,
                "embeddings": encoder.embeddings.count_params() - (projection.count_params() if projection else 0),
                "projection": projection.count_params() if projection else 0,
                # Not a sum over blocks: with partial sharing, blocks hold the same sublayer.
                "blocks": encoder.count_params() - encoder.embeddings.count_params() - encoder.pooler.count_params(),
                "pooler": encoder.pooler.count_params(),
                "encoder": encoder.count_params(),
                "heads": model.count_params() - encoder.count_params(),
            }
        )
        del model
        keras.backend.clear_session()
    return rows


def format_table(rows) -> str:
    columns = list(rows[0])
    cells = [[f"{r[c]:,}" if isinstance(r[c], int) and c not in ("L", "H", "E") else str(r[c]) for c in columns]
             for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = lambda values: "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths)))
    return "\n".join([line(columns), line(["-" * w for w in widths]), *map(line, cells)])


def release_table(names) -> list[dict]:
    """One row per released checkpoint: its size, parameters (the encoder; the pretraining heads)
    and where it is downloaded from."""
    from albert_tf.config import AlbertConfig, parameter_counts
    from albert_tf.presets.registry import RELEASES

    rows = []
    for name in names:
        release = RELEASES[name]
        config = AlbertConfig.named(release.size).replace(vocab_size=release.vocab_size)
        counts = parameter_counts(config)
        rows.append({"name": name, "L": config.num_hidden_layers, "H": config.hidden_size, "E": config.embedding_size,
                     "encoder": counts["encoder"], "heads": counts["heads"], "vocabulary": release.vocabulary,
                     "source": release.sources})
    return rows


def main(argv):
    del argv
    from albert_tf.config import SIZES
    from albert_tf.presets.registry import RELEASES

    known = SIZES if FLAGS.sizes else RELEASES
    names = FLAGS.presets or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        what = "sizes" if FLAGS.sizes else "released checkpoints"
        raise FlagError(f"--presets: unknown {what} {unknown}; known ones are {sorted(known)}")
    rows = parameter_table(names, build=FLAGS.build) if FLAGS.sizes else release_table(names)
    print(format_table(rows))


def run():
    run_main(main, FLAGS, __doc__)


if __name__ == "__main__":
    run()
