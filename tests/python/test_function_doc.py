"""docs/PYTHON_FUNCTION.md is executable: its python blocks run in order in
one new process and each prints exactly the text block that follows it
(stdout of Python and of the library's graph prints alike)."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "PYTHON_FUNCTION.md")
MARK = "@@@ block %d @@@"


def blocks():
    text = open(DOC).read()
    pairs = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", text, re.S)
    assert len(pairs) >= 10, "the document's examples were not found"
    return pairs


def test_every_example_prints_what_the_document_says(tmp_path):
    pairs = blocks()
    script = ["import sys", "sys.path.insert(0, %r)" % os.path.join(HERE, "..", "..", "python")]
    for i, (code, _) in enumerate(pairs):
        script.append("print(%r, flush=True)" % (MARK % i))
        script.append(code)
    script.append("print(%r, flush=True)" % (MARK % len(pairs)))
    prog = tmp_path / "python_function_doc.py"  # a file: AutoGraph reads the functions' source
    prog.write_text("\n".join(script) + "\n")
    # tf.print writes to stderr (as TF's): the document shows both streams
    out = subprocess.run([sys.executable, "-u", str(prog)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout
    for i, (code, want) in enumerate(pairs):
        got = out.stdout.split(MARK % i + "\n", 1)[1].split(MARK % (i + 1), 1)[0]
        assert got.strip() == want.strip(), "example %d:\n%s\nprinted:\n%s\nthe document says:\n%s" % (
            i, code, got, want)
