"""Counts the tests and the `assert` statements under tests/ (python bench/suite_census.py [tests_dir]).

Read from the source with `ast`, nothing imported or run, so that two trees (before and after a change
to the suite) are counted alike: a test is a `test_*` function (or method of a `Test*` class) in a
`test_*.py` file, counted once however it is parametrized; an assertion is an `assert` statement
anywhere under tests/ (helpers and fixtures included, since the tests assert through them), plus
`pytest.raises` and `pytest.fail` calls, which assert too. Parametrized cases are counted apart
(the number of cases a plain run collects is `pytest --collect-only -q`).
"""

import ast
import pathlib
import sys


def _is_call_to(node, names):
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr in names and isinstance(func.value, ast.Name) \
        and func.value.id == "pytest"


def _param_cases(function):
    """How many cases the function's `pytest.mark.parametrize` decorators make (literal lists only)."""
    cases = 1
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
                and decorator.func.attr == "parametrize" and len(decorator.args) >= 2 \
                and isinstance(decorator.args[1], (ast.List, ast.Tuple)):
            cases *= len(decorator.args[1].elts)
    return cases


def census(tests_dir: pathlib.Path) -> dict:
    counts = {"files": 0, "tests": 0, "cases": 0, "asserts": 0, "raises": 0}
    for path in sorted(tests_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                counts["asserts"] += 1
            elif isinstance(node, ast.Call) and _is_call_to(node, {"raises", "fail"}):
                counts["raises"] += 1
        if not path.name.startswith("test_"):
            continue
        counts["files"] += 1
        scopes = [tree.body] + [n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name.startswith("Test")]
        for body in scopes:
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                    counts["tests"] += 1
                    counts["cases"] += _param_cases(node)
    return counts


if __name__ == "__main__":
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1] / "tests")
    counts = census(root)
    print(f"{root}: {counts['files']} test files, {counts['tests']} test functions ({counts['cases']} cases with "
          f"literal parametrizations), {counts['asserts']} assert statements, {counts['raises']} pytest.raises/fail calls")
