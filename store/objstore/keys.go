package objstore

import (
	"strings"
	"unicode/utf8"
)

// tempPrefix starts the name of every temporary file the file:// backend writes; no key
// segment may start with it, so listings hide temp files exactly, leaked ones included.
const tempPrefix = ".tmp-"

const (
	maxKeyBytes     = 1024 // S3's limit; enforced everywhere so a key valid on one backend is valid on all
	maxSegmentBytes = 255  // NAME_MAX of common local filesystems; enforced everywhere for the same reason
)

// CheckKey enforces the key rules every backend shares (ErrInvalidInput otherwise): at most
// maxKeyBytes of UTF-8 without a control character or backslash, in "/"-separated segments
// that are non-empty, at most maxSegmentBytes, not "." or ".." and not starting tempPrefix.
func CheckKey(key string) error {
	if key == "" {
		return invalidf("empty key")
	}
	return checkSegments("key", key, key)
}

// checkPrefix enforces the key rules on a List prefix: "" is allowed, and so is a trailing
// "/" and a partial last segment.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return checkSegments("prefix", prefix, strings.TrimSuffix(prefix, "/"))
}

// checkSegments checks s, a key or prefix (what), whose segments are those of path.
func checkSegments(what, s, path string) error {
	if len(s) > maxKeyBytes {
		return invalidf("%s longer than %d bytes", what, maxKeyBytes)
	}
	if !utf8.ValidString(s) {
		return invalidf("key %q is not valid UTF-8", s)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return invalidf("key %q contains a control character or backslash", s)
	}
	for _, seg := range strings.Split(path, "/") {
		switch {
		case seg == "":
			return invalidf("key %q has an empty segment (leading, trailing or double \"/\")", s)
		case seg == "." || seg == "..":
			return invalidf("key %q has a %q segment", s, seg)
		case len(seg) > maxSegmentBytes:
			return invalidf("key %q has a segment longer than %d bytes", s, maxSegmentBytes)
		case strings.HasPrefix(seg, tempPrefix):
			return invalidf("key %q has a segment starting with reserved %q", s, tempPrefix)
		}
	}
	return nil
}

// isTempKey reports whether any segment of key is a temp name. Object stores never hold temp
// objects written by us, but a foreign tool might copy a file:// tree there; hide them alike.
func isTempKey(key string) bool {
	return strings.HasPrefix(key, tempPrefix) || strings.Contains(key, "/"+tempPrefix)
}
