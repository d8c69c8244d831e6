package manifest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strconv"
)

// glyph is the app's mark: a speech bubble with a window in it (a chat
// answer that opens a view), drawn on a 16×16 grid and scaled.
var glyph = []string{
	"................",
	"................",
	"..############..",
	".##..........##.",
	".#............#.",
	".#..########..#.",
	".#..#......#..#.",
	".#..#......#..#.",
	".#..########..#.",
	".#............#.",
	".##..........##.",
	"..#####..#####..",
	"......#.##......",
	"......###.......",
	"................",
	"................",
}

// inGlyph reports whether pixel (x, y) of a size×size image is on the mark.
func inGlyph(x, y, size int) bool {
	return glyph[y*16/size][x*16/size] == '#'
}

// ColorIcon is the 192×192 full-color icon: the white mark on the accent
// color, fully opaque.
func ColorIcon(accent string) ([]byte, error) {
	bg, err := hexColor(accent)
	if err != nil {
		return nil, err
	}
	img := image.NewNRGBA(image.Rect(0, 0, 192, 192))
	for y := range 192 {
		for x := range 192 {
			c := bg
			if inGlyph(x, y, 192) {
				c = color.NRGBA{255, 255, 255, 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return encode(img)
}

// OutlineIcon is the 32×32 outline icon: the mark in opaque white, all
// else fully transparent, as Teams requires.
func OutlineIcon() ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			if inGlyph(x, y, 32) {
				img.SetNRGBA(x, y, color.NRGBA{255, 255, 255, 255})
			}
		}
	}
	return encode(img)
}

func encode(img image.Image) ([]byte, error) {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, fmt.Errorf("manifest: icon: %w", err)
	}
	return b.Bytes(), nil
}

func hexColor(s string) (color.NRGBA, error) {
	if len(s) != 7 || s[0] != '#' {
		return color.NRGBA{}, fmt.Errorf("manifest: accent color %q: want #RRGGBB", s)
	}
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return color.NRGBA{}, fmt.Errorf("manifest: accent color %q: want #RRGGBB", s)
	}
	return color.NRGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}, nil
}
