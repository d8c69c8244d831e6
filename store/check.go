package store

import (
	"strings"
	"unicode/utf8"

	"teamsbot/internal/textclip"
)

// maxIDLen bounds ids used as keys; bbolt allows 32 KiB, ours are GUIDs.
const maxIDLen = 512

// checkID checks an id: present and bounded.
func checkID(what, id string) error {
	switch {
	case id == "":
		return invalid("%s is empty", what)
	case len(id) > maxIDLen:
		return invalid("%s is %d bytes long, at most %d", what, len(id), maxIDLen)
	}
	return nil
}

// checkKeyPart checks a string used as a part of a key: present, bounded,
// valid UTF-8 (JSON would silently change it otherwise, and the record
// would no longer match its key) and free of the NUL byte that ends key
// parts, so that no id can reach into the keys of another.
func checkKeyPart(what, v string) error {
	if err := checkID(what, v); err != nil {
		return err
	}
	return checkText(what, v, maxIDLen)
}

// checkText checks a string stored in a record: bounded, valid UTF-8, no
// NUL byte.
func checkText(what, v string, limit int) error {
	switch {
	case len(v) > limit:
		return invalid("%s is %d bytes long, at most %d", what, len(v), limit)
	case !utf8.ValidString(v):
		return invalid("%s is not valid UTF-8", what)
	case strings.IndexByte(v, 0) >= 0:
		return invalid("%s contains a NUL byte", what)
	}
	return nil
}

// checkKeyParts checks each pair of a name and a value as a key part.
func checkKeyParts(parts ...string) error {
	for i := 0; i+1 < len(parts); i += 2 {
		if err := checkKeyPart(parts[i], parts[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// keyablePart reports whether a stored tenant id can be a key part: older
// versions did not refuse a NUL byte in it.
func keyablePart(v string) bool { return strings.IndexByte(v, 0) < 0 }

// cutText makes a text that came from outside fit a record: valid UTF-8
// (JSON would replace the bytes that are not anyway), without NUL bytes,
// and at most limit bytes, cut on a character's boundary and marked with
// an ellipsis when it was longer.
func cutText(v string, limit int) string {
	v = strings.ReplaceAll(strings.ToValidUTF8(v, "\uFFFD"), "\x00", "\uFFFD")
	if len(v) <= limit {
		return v
	}
	return textclip.Prefix(v, limit-len(textclip.Ellipsis)) + textclip.Ellipsis
}
