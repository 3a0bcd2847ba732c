package worker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// byteUnits are the suffixes ParseBytes accepts, longest first.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10},
	{"TI", 1 << 40}, {"GI", 1 << 30}, {"MI", 1 << 20}, {"KI", 1 << 10},
	{"B", 1},
}

// ParseBytes reads a byte size: a plain integer or one with a binary suffix
// (KiB, MiB, GiB, TiB; "Ki"… and case are accepted).
func ParseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 1048576 or 1MiB)", s)
	}
	if v != 0 && (v > (1<<63-1)/mult || v < -(1<<63-1)/mult) {
		return 0, fmt.Errorf("%q overflows", s)
	}
	return v * mult, nil
}

// FormatBytes prints a size with the largest exact binary suffix.
func FormatBytes(v int64) string {
	for _, u := range byteUnits[:4] {
		if v != 0 && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.suffix[:1] + "iB"
		}
	}
	return strconv.FormatInt(v, 10)
}

// ParseDuration reads a Go duration ("5s", "2m30s") or plain seconds ("30").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		const most = int64(math.MaxInt64 / time.Second)
		if n > most || n < -most { // the product would wrap to an unrelated duration
			return 0, fmt.Errorf("%q seconds is out of range (at most %d)", s, most)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 5s, 2m, or plain seconds)", s)
	}
	return d, nil
}

// parseBool accepts strconv.ParseBool's spellings plus yes/no and on/off.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "on":
		return true, nil
	case "no", "off":
		return false, nil
	}
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean", s)
	}
	return v, nil
}
