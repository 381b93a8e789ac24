package sparkplug

import (
	"cmp"
	"errors"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// readerStateVersion is the first byte of a Reader's snapshot.
const readerStateVersion = 1

// AppendSnapshot appends the Reader's state — per node its session (born,
// bdSeq, seq), born devices, and metrics with their aliases and last
// values — to dst, so that a restored source resolves the aliases of data
// that follows births it read before the restart. Nodes are written in
// order, so equal states give equal bytes.
func (r *Reader) AppendSnapshot(dst []byte) []byte {
	dst = append(dst, readerStateVersion)
	keys := make([]nodeKey, 0, len(r.nodes))
	for k := range r.nodes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nodeKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.node, b.node))
	})
	dst = protowire.AppendVarint(dst, uint64(len(keys)))
	for _, k := range keys {
		n := r.nodes[k]
		dst = protowire.AppendString(dst, k.group)
		dst = protowire.AppendString(dst, k.node)
		dst = protowire.AppendVarint(dst, protowire.EncodeBool(n.born))
		dst = protowire.AppendVarint(dst, n.bdSeq)
		dst = protowire.AppendVarint(dst, n.seq)
		devices := make([]string, 0, len(n.devices))
		for d := range n.devices {
			devices = append(devices, d)
		}
		slices.Sort(devices)
		dst = protowire.AppendVarint(dst, uint64(len(devices)))
		for _, d := range devices {
			dst = protowire.AppendString(dst, d)
		}
		alias := make([]uint64, len(n.metrics)) // alias+1 per metric, 0 = none
		for a, i := range n.aliases {
			alias[i] = a + 1
		}
		dst = protowire.AppendVarint(dst, uint64(len(n.metrics)))
		for i, m := range n.metrics {
			dst = protowire.AppendString(dst, m.device)
			dst = protowire.AppendBytes(dst, m.name)
			dst = protowire.AppendVarint(dst, uint64(m.datatype))
			dst = protowire.AppendVarint(dst, alias[i])
			dst = protowire.AppendVarint(dst, uint64(m.last.Kind))
			dst = protowire.AppendVarint(dst, m.last.Bits)
			dst = protowire.AppendBytes(dst, m.last.Str)
			dst = protowire.AppendVarint(dst, protowire.EncodeBool(m.lastNull))
		}
	}
	return dst
}

// snapReader reads a snapshot, remembering the first error.
type snapReader struct {
	b   []byte
	off int
	err error
}

func (s *snapReader) fail(what string) {
	if s.err == nil {
		s.err = errors.New("sparkplug: reader snapshot: " + what + " at byte " + strconv.Itoa(s.off))
	}
}

func (s *snapReader) varint(what string) uint64 {
	if s.err != nil {
		return 0
	}
	v, n := protowire.ConsumeVarint(s.b[s.off:])
	if n < 0 {
		s.fail("truncated " + what)
		return 0
	}
	s.off += n
	return v
}

func (s *snapReader) bytes(what string) []byte {
	if s.err != nil {
		return nil
	}
	v, n := protowire.ConsumeBytes(s.b[s.off:])
	if n < 0 {
		s.fail("truncated " + what)
		return nil
	}
	s.off += n
	return append([]byte(nil), v...)
}

// count reads a length, bounded by the bytes left (each element takes at
// least one), so a corrupt length cannot make Restore allocate without
// bound.
func (s *snapReader) count(what string) int {
	v := s.varint(what)
	if v > uint64(len(s.b)-s.off) {
		s.fail(what + " " + strconv.FormatUint(v, 10) + " exceeds the snapshot")
		return 0
	}
	return int(v)
}

// Restore replaces the Reader's state with a snapshot AppendSnapshot wrote.
// On error the Reader is unchanged.
func (r *Reader) Restore(b []byte) error {
	if len(b) == 0 || b[0] != readerStateVersion {
		return errors.New("sparkplug: reader snapshot: unknown version")
	}
	s := &snapReader{b: b, off: 1}
	nodes := map[nodeKey]*readerNode{}
	for range s.count("node count") {
		k := nodeKey{string(s.bytes("group")), string(s.bytes("node"))}
		n := &readerNode{devices: map[string]bool{}, aliases: map[uint64]int{}}
		n.born = s.varint("born") != 0
		n.bdSeq = s.varint("bdSeq")
		n.seq = s.varint("seq")
		for range s.count("device count") {
			n.devices[string(s.bytes("device"))] = true
		}
		metrics := s.count("metric count")
		for i := range metrics {
			m := known{device: string(s.bytes("metric device")), name: s.bytes("metric name"), datatype: DataType(s.varint("datatype"))}
			if a := s.varint("alias"); a != 0 {
				n.aliases[a-1] = i
			}
			kind := s.varint("value kind")
			if kind > uint64(KindUnsupported) {
				s.fail("value kind " + strconv.FormatUint(kind, 10))
			}
			m.last = Value{Kind: Kind(kind), Bits: s.varint("value"), Str: s.bytes("value bytes")}
			m.lastNull = s.varint("null") != 0
			n.metrics = append(n.metrics, m)
		}
		if s.err != nil {
			return s.err
		}
		nodes[k] = n
	}
	if s.err == nil && s.off != len(b) {
		s.fail("trailing data")
	}
	if s.err != nil {
		return s.err
	}
	r.nodes = nodes
	return nil
}
