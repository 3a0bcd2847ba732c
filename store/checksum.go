package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// Every generation file and base run is listed in a manifest with the CRC-32C of its bytes,
// checked before decoding, since a flipped bit can decode into plausible wrong rows
// (docs/RELIABILITY.md finding 10); an entry without one is ErrCorrupt (read_object.go).

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksumOf returns the manifest form of data's checksum: 8 lower-case hex digits.
func checksumOf(data []byte) string {
	return formatChecksum(crc32.Checksum(data, castagnoli))
}

func formatChecksum(sum uint32) string { return fmt.Sprintf("%08x", sum) }

// newChecksumWriter returns w teed into a checksum, and sum, the manifest form of the
// checksum of what was written through it.
func newChecksumWriter(w io.Writer) (_ io.Writer, sum func() string) {
	h := crc32.New(castagnoli)
	return io.MultiWriter(w, h), func() string { return formatChecksum(h.Sum32()) }
}

// WAL objects are listed by no manifest, so their checksum travels in the object: an 8-byte
// magic and the CRC-32C (big-endian) of the IPC bytes that follow, ErrCorrupt without it.
const walFrameMagic = "WKWAL1\x00\x00"

const walFrameHeader = len(walFrameMagic) + 4

// frameWAL prefixes ipc with the WAL header, deterministically: a retried put writes the same.
func frameWAL(ipc []byte) []byte {
	out := make([]byte, walFrameHeader, walFrameHeader+len(ipc))
	copy(out, walFrameMagic)
	binary.BigEndian.PutUint32(out[len(walFrameMagic):], crc32.Checksum(ipc, castagnoli))
	return append(out, ipc...)
}

// unframeWAL checks a framed WAL object and returns its IPC bytes.
func unframeWAL(raw []byte, what string) ([]byte, error) {
	if !bytes.HasPrefix(raw, []byte(walFrameMagic)) {
		return nil, corruptf("%s: no WAL header (%d bytes), so no checksum to check", what, len(raw))
	}
	if len(raw) < walFrameHeader {
		return nil, corruptf("%s: %d bytes, shorter than its header", what, len(raw))
	}
	want := binary.BigEndian.Uint32(raw[len(walFrameMagic):walFrameHeader])
	ipc := raw[walFrameHeader:]
	if got := crc32.Checksum(ipc, castagnoli); got != want {
		return nil, corruptf("%s: checksum %s, header says %s (%d bytes read)", what, formatChecksum(got), formatChecksum(want), len(raw))
	}
	return ipc, nil
}
