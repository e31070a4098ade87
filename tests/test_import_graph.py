"""The house's imports: no circle anywhere (module-level and function-level imports alike), and
albert_tf's rooms imported downward only.

A function-level import that closes a circle still ties the modules into one knot that a reader
must hold at once (and that only works by the order of execution). `from package import module` is
an edge to that module.
"""

import ast

from tests.conftest import REPO_ROOT

PACKAGES = ("albert_tf", "data_prep", "finetune")


def _modules() -> dict[str, object]:
    modules = {}
    for package in PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                target = known(target)
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_house():
    graph = import_graph()
    assert "albert_tf.presets.loader" in graph["finetune.cli"]  # the graph sees function-level imports
    assert cycles(graph) == []


def test_imports_go_one_way():
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith("albert_tf"):
            assert not {t for t in targets if t.startswith(("data_prep", "finetune"))}, name


def test_conversion_and_presets_import_no_model_class():
    graph = import_graph()
    models = {"albert_tf.models.encoder", "albert_tf.models.pretrainer", "albert_tf.tasks.text_classifier", "albert_tf.models.base",
              "albert_tf.models", "albert_tf.models.classifier"}
    below = {"albert_tf.presets.convert", "albert_tf.checkpoints.names"} | {n for n in graph if n.startswith("albert_tf.presets")}
    seen, todo = set(), list(below)
    while todo:  # everything they reach, directly or not
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    assert not seen & models, sorted(seen & models)


def test_the_library_imports_no_console_script():
    """Issue 39: the Beam pipeline imported albert_tf.cli.entry_point. Only the console scripts (the
    CLI modules and data_prep's two tools) import the CLI layer; the option dataclasses the flags
    come from live below it."""
    graph = import_graph()
    tools = {"data_prep.create_pretraining_data", "data_prep.train_vocab"}
    for name, targets in graph.items():
        if name.startswith("albert_tf.cli") or name in tools or name.endswith(".cli"):
            continue
        assert not {t for t in targets if t.startswith("albert_tf.cli") or t.endswith(".cli") or t in tools}, name


# albert_tf's rooms, lowest first: a module imports from its own room or a lower one, never a higher
# one (`albert_tf` itself, the package's __init__, sits just above utils).
ROOMS = ("utils", "albert_tf", "config", "tokenizers", "data", "layers", "checkpoints", "presets", "models",
         "training", "serving", "tasks", "cli")


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module in a higher room than the importer's, as 'importer -> imported'."""
    rank = {name: i for i, name in enumerate(ROOMS)}
    return sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith("albert_tf")
                  for target in targets
                  if target.startswith("albert_tf") and rank[room(target)] > rank[room(name)])


def test_the_checker_finds_an_upward_import():
    graph = {"albert_tf.models.encoder": {"albert_tf.layers.common", "albert_tf.serving.export"},
             "albert_tf.layers.common": {"albert_tf.utils.errors"}, "albert_tf.utils.errors": set()}
    assert upward_imports(graph) == ["albert_tf.models.encoder -> albert_tf.serving.export"]


def test_albert_tf_imports_go_down_its_rooms():
    graph = import_graph()
    assert {room(name) for name in graph if name.startswith("albert_tf")} <= set(ROOMS)
    assert upward_imports(graph) == []


def test_every_module_lives_in_a_room():
    """The tree shows the architecture: no module of albert_tf outside a concept folder but the
    package's __init__.py and config.py (the one object every room takes)."""
    loose = sorted(path.name for path in (REPO_ROOT / "albert_tf").glob("*.py"))
    assert loose == ["__init__.py", "config.py"]


# The calls that read weights out of a file: a run's checkpoints, preset and Hugging Face files,
# TF1 checkpoints, a SavedModel's variables.
_WEIGHT_READS = ("tf.train.load_checkpoint", "tf.train.list_variables", "CheckpointReader", "load_file(",
                 "torch.load", "weights_module.read(", "preset_weights.read(", "in loaded.variables")
# Who may: the one resolver (model_source), the preset's and the foreign formats' readers beneath it,
# the weights file format itself, and the training loop resuming its own run (not a source).
WEIGHT_READERS = {"albert_tf.presets.model_source", "albert_tf.presets.folder", "albert_tf.presets.convert",
                  "albert_tf.checkpoints.weights", "albert_tf.training.loop"}


def test_only_the_loader_reads_weights():
    """Issue 50: five load paths had their own rules; one resolver reads every source now."""
    readers = set()
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        if any(call in text for call in _WEIGHT_READS):
            readers.add(name)
    assert readers <= WEIGHT_READERS, sorted(readers - WEIGHT_READERS)
    assert {"albert_tf.presets.model_source", "albert_tf.presets.convert"} <= readers  # the rule sees them


# What a console script may take from the rooms that run: the option fields its flags come from,
# the strategy factory its --strategy names, the summaries it prints, and the run as a library call
# (`run_pretraining`, `run_finetuning`); the loop, the trainer and the input pipeline are the run's.
CONSOLE_SCRIPTS_MAY_IMPORT = {"albert_tf.training.options", "albert_tf.training.strategies",
                              "albert_tf.training.summaries", "albert_tf.training.pretraining", "finetune.run",
                              "finetune.options", "finetune.cli", "finetune.task"}


def console_scripts(graph: dict[str, set[str]]) -> list[str]:
    tools = {"data_prep.create_pretraining_data", "data_prep.train_vocab"}
    return sorted(name for name in graph if name.startswith("albert_tf.cli.") or name.endswith(".cli") or name in tools)


def test_console_scripts_reach_the_runs_through_run_calls_only():
    """A console script maps flags to options and calls the run (issue 51): it imports nothing of the
    training loop, the fine-tuning trainer, its inputs or its cache."""
    graph = import_graph()
    scripts = console_scripts(graph)
    assert {"finetune.cli", "finetune.glue.cli", "albert_tf.cli.pretrain", "albert_tf.cli.export"} <= set(scripts)
    assert "finetune.run" in graph["finetune.cli"]
    internals = {"albert_tf.training", "finetune.trainer", "finetune.inputs", "finetune.cache"}
    for name in scripts:
        reached = {t for t in graph[name] if t.startswith(tuple(internals)) or t.startswith("finetune.run")}
        assert reached <= CONSOLE_SCRIPTS_MAY_IMPORT, (name, sorted(reached - CONSOLE_SCRIPTS_MAY_IMPORT))


# The modules that hold a run as a library call; a console script takes only the call from them.
RUN_MODULES = ("albert_tf.training.pretraining", "finetune.run")


def names_taken(path, modules=RUN_MODULES) -> set[str]:
    """The names a file takes from `modules`: `from m import name`, and `alias.name` where it
    imports the module itself (`from albert_tf.training import pretraining`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    taken, aliases = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module in modules:
                    taken.add(alias.name)
                elif f"{node.module}.{alias.name}" in modules:
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            aliases |= {alias.asname for alias in node.names if alias.name in modules and alias.asname}
    taken |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
              and isinstance(node.value, ast.Name) and node.value.id in aliases}
    return taken


def test_the_checker_sees_a_run_internal_taken(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("from finetune.run import run_finetuning, check_actions\n"
                      "from albert_tf.training import pretraining\npretraining.Trainer(1)\n")
    assert names_taken(script) == {"run_finetuning", "check_actions", "Trainer"}


def test_the_clis_take_nothing_of_a_run_but_its_call():
    """Issue 51: a console script maps flags to options and calls `run_*`; of the run's modules it
    takes only that call and the names of what it returns or is given (constants, option classes),
    never a step of the run (the CLI ran `check_actions` that `run_finetuning` ran again)."""
    for name in console_scripts(import_graph()):
        path = _modules()[name]
        functions = {n for n in names_taken(path) if not (n.isupper() or n[:1].isupper())}
        assert {n for n in functions if not n.startswith("run_")} == set(), (name, sorted(functions))
    assert names_taken(_modules()["finetune.cli"]) >= {"run_finetuning"}
    assert names_taken(_modules()["albert_tf.cli.pretrain"]) >= {"run_pretraining"}


def test_the_utils_rules_import_no_tensorflow_and_nothing_above_utils():
    """The filesystem layer and its rules (files, atomic, patterns, compression, output_dirs, locks)
    serve the data-prep workers and the Beam pipeline, which must stay free of TensorFlow (issue 22):
    none imports TensorFlow at its top, or a room above utils."""
    for name in ("files", "atomic", "patterns", "compression", "output_dirs", "locks"):
        path = REPO_ROOT / "albert_tf" / "utils" / f"{name}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names]
        top += [node.module or "" for node in tree.body if isinstance(node, ast.ImportFrom)]
        assert not [m for m in top if m.split(".")[0] in ("tensorflow", "keras")], (name, top)
        assert all(not m.startswith("albert_tf.") or m.startswith("albert_tf.utils.") for m in top), (name, top)


# The export's formats, quantizations and precisions, and the check of a combination of them.
_EXPORT_CHOICES = ("EXPORT_FORMATS", "QUANTIZATIONS", "PRECISIONS")


def test_only_serving_defines_export_formats():
    """Issue 51: the formats lived in training/options.py (the only reason serving sat above
    training) and "LiteRT has no bf16" was written at three doors. Now albert_tf/serving/formats.py
    defines the choices and checks them, free of TensorFlow (the tools' --help), and every door
    calls it."""
    defined, refusals = {}, set()
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in _EXPORT_CHOICES:
                        defined.setdefault(target.id, set()).add(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    "is for SavedModels" in node.value or node.value.endswith("LiteRT has no ")):  # the refusal's words
                refusals.add(name)
    assert defined == {choice: {"albert_tf.serving.formats"} for choice in _EXPORT_CHOICES}, defined
    assert refusals == {"albert_tf.serving.formats"}, sorted(refusals)
    graph = import_graph()
    assert not {t for t in graph["albert_tf.serving.formats"] if not t.startswith("albert_tf.utils")}
    formats = ast.parse((REPO_ROOT / "albert_tf" / "serving" / "formats.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(formats) if isinstance(n, (ast.Import, ast.ImportFrom))
                and "tensorflow" in ast.unparse(n)]
    for door in ("albert_tf.cli.export", "finetune.cli", "finetune.task", "albert_tf.serving.export"):
        assert "albert_tf.serving.formats" in graph[door], door
