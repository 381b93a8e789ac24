package sparkplug

import (
	"errors"
	"strconv"
	"strings"
)

// Namespace is the first level of every Sparkplug B topic.
const Namespace = "spBv1.0"

// MessageType is the third level of a Sparkplug topic.
type MessageType uint8

// The message types of Sparkplug B, and STATE (a host application's
// state, whose topic has no group).
const (
	NBIRTH MessageType = iota + 1
	NDEATH
	NDATA
	NCMD
	DBIRTH
	DDEATH
	DDATA
	DCMD
	STATE
)

var typeNames = [...]string{NBIRTH: "NBIRTH", NDEATH: "NDEATH", NDATA: "NDATA", NCMD: "NCMD",
	DBIRTH: "DBIRTH", DDEATH: "DDEATH", DDATA: "DDATA", DCMD: "DCMD", STATE: "STATE"}

func (t MessageType) String() string {
	if t > 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "MessageType(" + strconv.Itoa(int(t)) + ")"
}

// IsDevice reports whether topics of type t name a device.
func (t MessageType) IsDevice() bool { return t >= DBIRTH && t <= DCMD }

// Topic is a parsed Sparkplug topic. For STATE, Node holds the host
// application's id and Group is empty.
type Topic struct {
	Type   MessageType
	Group  string
	Node   string
	Device string // only for DBIRTH, DDEATH, DDATA and DCMD
}

// ValidID reports why id cannot be a group, node, device or host id, or "".
func ValidID(id string) string {
	if id == "" {
		return "is empty"
	}
	if strings.ContainsAny(id, "/+#") {
		return "contains '/', '+' or '#'"
	}
	return ""
}

// AppendTopic appends t's topic string to dst. It does not check the ids
// (Node checks its own once; ParseTopic checks what arrives).
func AppendTopic(dst []byte, t Topic) []byte {
	dst = append(dst, Namespace...)
	dst = append(dst, '/')
	if t.Type == STATE {
		dst = append(dst, "STATE/"...)
		return append(dst, t.Node...)
	}
	dst = append(dst, t.Group...)
	dst = append(dst, '/')
	dst = append(dst, t.Type.String()...)
	dst = append(dst, '/')
	dst = append(dst, t.Node...)
	if t.Type.IsDevice() {
		dst = append(dst, '/')
		dst = append(dst, t.Device...)
	}
	return dst
}

// String is the topic string.
func (t Topic) String() string { return string(AppendTopic(nil, t)) }

var errNotSparkplug = errors.New("sparkplug: topic is not in the " + Namespace + " namespace")

// ParseTopic parses a Sparkplug B topic. The strings of the result alias
// s.
func ParseTopic(s string) (Topic, error) {
	rest, ok := strings.CutPrefix(s, Namespace+"/")
	if !ok {
		return Topic{}, errNotSparkplug
	}
	// Split without allocating: a source parses every message's topic.
	var buf [5]string
	parts := buf[:0]
	for len(parts) < len(buf) {
		level, after, more := strings.Cut(rest, "/")
		parts = append(parts, level)
		rest = after
		if !more {
			break
		}
		if len(parts) == len(buf) {
			return Topic{}, errors.New("sparkplug: topic " + s + " has too many levels")
		}
	}
	if len(parts) == 2 && parts[0] == "STATE" {
		if why := ValidID(parts[1]); why != "" {
			return Topic{}, errors.New("sparkplug: STATE topic " + s + ": host id " + why)
		}
		return Topic{Type: STATE, Node: parts[1]}, nil
	}
	if len(parts) < 3 {
		return Topic{}, errors.New("sparkplug: topic " + s + " has too few levels")
	}
	var t Topic
	for i, name := range typeNames {
		if name != "" && name == parts[1] && MessageType(i) != STATE {
			t.Type = MessageType(i)
		}
	}
	if t.Type == 0 {
		return Topic{}, errors.New("sparkplug: topic " + s + ": unknown message type " + parts[1])
	}
	want := 3
	if t.Type.IsDevice() {
		want = 4
	}
	if len(parts) != want {
		return Topic{}, errors.New("sparkplug: topic " + s + ": " + parts[1] + " takes " + strconv.Itoa(want) + " levels after the namespace")
	}
	t.Group, t.Node = parts[0], parts[2]
	if want == 4 {
		t.Device = parts[3]
	}
	for _, id := range parts {
		if why := ValidID(id); why != "" {
			return Topic{}, errors.New("sparkplug: topic " + s + ": a level " + why)
		}
	}
	return t, nil
}
