"""samples/describe_media.py run as a script offline: the scripted model gets the parts."""

from __future__ import annotations

from pathlib import Path

from tests.media_samples import png
from tests.samples_support import run_sample


def test_describe_media_sample_sends_the_image_and_the_pdf_as_parts() -> None:
    done = run_sample("describe_media.py")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert ">   [image image/png, " in out
    assert "image/png image of 64 x 48 pixels" in out
    assert ">   [file 'lease.pdf', application/pdf, " in out
    assert "lease.pdf (application/pdf, " in out and "1 200 EUR a month" in out
    assert "base64" not in out


def test_describe_media_sample_reads_the_files_it_is_given(tmp_path: Path) -> None:
    picture = tmp_path / "dot.png"
    picture.write_bytes(png(5, 7))
    done = run_sample("describe_media.py", str(picture))
    assert done.returncode == 0, done.stderr
    assert "image/png image of 5 x 7 pixels" in done.stdout


def test_describe_media_sample_refuses_a_truncated_image(tmp_path: Path) -> None:
    picture = tmp_path / "cut.png"
    picture.write_bytes(png(5, 7)[:-20])
    done = run_sample("describe_media.py", str(picture))
    assert done.returncode != 0
    assert "ContentPartError" in done.stderr and "IEND" in done.stderr
