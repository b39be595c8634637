"""Draw the Teams app icons: appPackage/color.png (192×192) and appPackage/outline.png (32×32).

The glyph is a document with a folded corner and text lines, and a magnifying glass over its lower
right corner: "searches your documents". The color icon is a white glyph on a rounded square in the
manifest's accent colour; the outline icon is the same glyph as white strokes on a fully transparent
background (every pixel white, only the alpha channel varies), as Teams requires.

Drawn with Pillow primitives at a multiple of the final size and reduced with box averaging, which
gives clean anti-aliased edges. Deterministic: running it again writes identical files.

    python tools/make_teams_icons.py [--out-dir appPackage] [--accent "#2B5797"]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from PIL import Image, ImageDraw

REPO_ROOT = Path(__file__).resolve().parent.parent
APP_PACKAGE = REPO_ROOT / "appPackage"
COLOR_SIZE = 192
OUTLINE_SIZE = 32
WHITE = (255, 255, 255)

Point = tuple[float, float]


def hex_rgb(color: str) -> tuple[int, int, int]:
    value = color.lstrip("#")
    if len(value) != 6:
        raise ValueError(f"not a #RRGGBB colour: {color!r}")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def template_accent() -> str:
    """The accentColor of appPackage/manifest.json, so that icon and manifest agree."""
    manifest = json.loads((APP_PACKAGE / "manifest.json").read_text("utf-8"))
    return str(manifest["accentColor"])


def _handle_end(center: Point, start: float, length: float) -> tuple[Point, Point]:
    """Start and end of the magnifier handle, pointing to the lower right (45°)."""
    d = math.sqrt(0.5)
    cx, cy = center
    return (cx + start * d, cy + start * d), (cx + (start + length) * d, cy + (start + length) * d)


def draw_color(accent: tuple[int, int, int], scale: int = 8) -> Image.Image:
    """192×192: rounded square in the accent colour, white document and magnifier."""
    size = COLOR_SIZE * scale
    # The glyph is drawn in its own units, then centred on the square and shrunk by `k` for margins.
    glyph_center, k = (107.0, 103.0), 0.9

    def p(x: float, y: float) -> tuple[float, float]:
        return (
            ((x - glyph_center[0]) * k + COLOR_SIZE / 2) * scale,
            ((y - glyph_center[1]) * k + COLOR_SIZE / 2) * scale,
        )

    def box(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
        return (*p(x0, y0), *p(x1, y1))

    def length(value: float) -> int:
        return round(value * k * scale)

    # Transparent pixels carry the accent colour so that averaging at the rounded edge stays in tone.
    image = Image.new("RGBA", (size, size), (*accent, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((0, 0, size - 1, size - 1), 40 * scale, (*accent, 255))

    # The page: 78×112 with a 24-unit folded corner at the top right.
    left, top, right, bottom, fold = 46.0, 36.0, 124.0, 148.0, 24.0
    # A rounded rectangle with its top right corner cut off along the fold.
    draw.rounded_rectangle(box(left, top, right, bottom), length(7), fill=(*WHITE, 255))
    draw.polygon(
        [p(right - fold, top - 1), p(right + 1, top - 1), p(right + 1, top + fold)], fill=(*accent, 255)
    )
    # The fold: a slightly darker triangle folded over the corner.
    shade = tuple(int(c * 0.25 + 255 * 0.75) for c in accent)
    draw.polygon(
        [p(right - fold, top), p(right - fold, top + fold), p(right, top + fold)], fill=(*shade, 255)
    )

    # Text lines in the accent colour.
    line_w = 8.0
    for y, x_end in ((62, 98), (80, 108), (98, 90), (116, 78)):
        draw.rounded_rectangle(
            box(left + 12, y - line_w / 2, x_end, y + line_w / 2), length(line_w / 2), fill=(*accent, 255)
        )

    # The magnifier over the lower right corner, set off from the page by an accent halo.
    center, radius, ring, gap = (124.0, 126.0), 25.0, 9.0, 7.0
    (hx0, hy0), (hx1, hy1) = _handle_end(center, radius - 2, 30)
    handle_w = 14.0
    cx, cy = center
    halo = radius + gap
    draw.ellipse(box(cx - halo, cy - halo, cx + halo, cy + halo), fill=(*accent, 255))
    draw.line([p(hx0, hy0), p(hx1, hy1)], fill=(*accent, 255), width=length(handle_w + 2 * gap))
    _round_cap(draw, p(hx1, hy1), length(handle_w / 2 + gap), (*accent, 255))
    draw.ellipse(box(cx - radius, cy - radius, cx + radius, cy + radius), fill=(*WHITE, 255))
    inner = radius - ring
    draw.ellipse(box(cx - inner, cy - inner, cx + inner, cy + inner), fill=(*accent, 255))
    draw.line([p(hx0, hy0), p(hx1, hy1)], fill=(*WHITE, 255), width=length(handle_w))
    _round_cap(draw, p(hx1, hy1), length(handle_w / 2), (*WHITE, 255))
    # A small highlight in the lens.
    hl = inner * 0.55
    draw.arc(box(cx - hl, cy - hl, cx + hl, cy + hl), 195, 265, fill=(*WHITE, 255), width=length(3.5))

    return image.reduce(scale)


def draw_outline(scale: int = 16) -> Image.Image:
    """32×32: the same glyph as white strokes; everything else fully transparent."""
    size = OUTLINE_SIZE * scale

    def p(x: float, y: float) -> tuple[float, float]:
        return x * scale, y * scale

    def box(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
        return x0 * scale, y0 * scale, x1 * scale, y1 * scale

    mask = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(mask)
    stroke = 2.0
    w = int(stroke * scale)
    # Page outline, stroke centred on the path: pixel-aligned edges at x 5..7 and 21..23.
    left, top, right, bottom, fold = 6.0, 3.0, 22.0, 29.0, 6.0
    outline = [p(left, top), p(right - fold, top), p(right, top + fold), p(right, bottom), p(left, bottom)]
    draw.line([*outline, outline[0]], fill=255, width=w, joint="curve")
    draw.line([p(right - fold, top), p(right - fold, top + fold), p(right, top + fold)], fill=255, width=w)
    for corner in outline:
        _round_cap(draw, corner, stroke / 2 * scale, 255)
    # Two text lines.
    for y, x_end in ((12.0, 16.0), (17.0, 14.0)):
        draw.line([p(left + 4, y), p(x_end, y)], fill=255, width=w)
        _round_cap(draw, p(left + 4, y), stroke / 2 * scale, 255)
        _round_cap(draw, p(x_end, y), stroke / 2 * scale, 255)

    # Magnifier, cut out of the page with a transparent halo.
    center, radius = (21.0, 21.0), 5.0
    cx, cy = center
    (hx0, hy0), (hx1, hy1) = _handle_end(center, radius, 5.5)
    handle_w, gap = 3.0, 2.0
    halo = radius + stroke / 2 + gap
    draw.ellipse(box(cx - halo, cy - halo, cx + halo, cy + halo), fill=0)
    draw.line([p(hx0, hy0), p(hx1, hy1)], fill=0, width=int((handle_w + 2 * gap) * scale))
    _round_cap(draw, p(hx1, hy1), (handle_w / 2 + gap) * scale, 0)
    outer, inner = radius + stroke / 2, radius - stroke / 2
    draw.ellipse(box(cx - outer, cy - outer, cx + outer, cy + outer), fill=255)
    draw.ellipse(box(cx - inner, cy - inner, cx + inner, cy + inner), fill=0)
    draw.line([p(hx0, hy0), p(hx1, hy1)], fill=255, width=int(handle_w * scale))
    _round_cap(draw, p(hx1, hy1), handle_w / 2 * scale, 255)

    alpha = mask.reduce(scale)
    image = Image.new("RGBA", (OUTLINE_SIZE, OUTLINE_SIZE), (*WHITE, 0))
    image.putalpha(alpha)
    return image


def _round_cap(draw: ImageDraw.ImageDraw, center: Point, r: float, fill: int | tuple[int, ...]) -> None:
    x, y = center
    draw.ellipse((x - r, y - r, x + r, y + r), fill=fill)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out-dir", type=Path, default=APP_PACKAGE, help="where to write the PNGs")
    parser.add_argument("--accent", help="background colour #RRGGBB (default: the manifest's accentColor)")
    args = parser.parse_args(argv)
    try:
        accent = hex_rgb(args.accent or template_accent())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    color_path, outline_path = args.out_dir / "color.png", args.out_dir / "outline.png"
    draw_color(accent).save(color_path, optimize=True)
    draw_outline().save(outline_path, optimize=True)
    print(
        f"wrote {color_path} ({COLOR_SIZE}×{COLOR_SIZE}) and {outline_path} ({OUTLINE_SIZE}×{OUTLINE_SIZE})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
