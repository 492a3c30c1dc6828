"""A report page as a browser sees it: headless Chromium (when installed) loads the page with a probe script that
counts the images it decoded and measures the layout, and the test reads the probe back from the dumped DOM."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PROBE = """<script>
window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({
    images: images.length,
    decoded: images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
    alts: images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).map(function (i) { return i.alt; }),
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    text: document.body.innerText.length
  });
  document.body.appendChild(out);
});
</script>"""


def probe_in_chromium(page: Path, work: Path) -> tuple[dict[str, Any], str]:
    """(the probe's findings, the dumped DOM) of ``page`` opened in headless Chromium (``work``: a scratch folder)."""
    assert CHROMIUM is not None
    probed = work / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={work / 'profile'}",
        "--window-size=1024,768",
        "--virtual-time-budget=5000",
        "--dump-dom",
        probed.as_uri(),
    ]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    probe = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1))
    return probe, dom
