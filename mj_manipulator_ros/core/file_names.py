"""File names made from names a robot chose (arms, joints, plans, checks).

Joint names carry what MuJoCo prefixes and ROS namespaces put in them (``vx300s_left/waist``);
written into a path as they are, "/" makes a folder that does not exist and other characters
are unsafe on some file systems. Every file name this package derives from such a name goes
through :func:`file_name`: letters, digits, "-", "_" and "." are kept, every other character
becomes "%XX" (its UTF-8 bytes, as in a URL), so two different names never make one file
name, and the name is read back with ``urllib.parse.unquote``.
"""

from __future__ import annotations

from urllib.parse import quote

#: characters kept as they are (besides ASCII letters and digits)
KEPT = "-_."


def file_name(name: str) -> str:
    """``name`` as one safe path component: never empty ("" becomes "%00"), never "." or ".."
    (their dots become "%2E")."""
    out = quote(name, safe=KEPT)
    if out in ("", ".", ".."):
        out = out.replace(".", "%2E") or "%00"
    return out
