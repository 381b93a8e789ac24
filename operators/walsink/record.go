package walsink

import (
	"encoding/binary"
	"fmt"

	"github.com/eddy-edge/eddy/operators/walsink/qos2"
	"github.com/eddy-edge/eddy/operators/walsink/wal"
)

// Record kinds: the first payload byte of every WAL frame. Zero is invalid.
const (
	kindInvalid   byte = iota
	kindState          // snapshot of the log state; first frame of every segment
	kindData           // one message of an epoch
	kindPreCommit      // all data of epochs ≤ epoch is durable
	kindCommit         // checkpoint epoch completed: data ≤ seq publishable
	kindAbort          // data seqs from..to will never be published
	kindSession        // a batch of publish-flow steps
	kindDrop           // drop_oldest skipped committed seqs from..to
	kindResume         // QoS 1: every seq below is acknowledged; no QoS 2 flow is open
)

const flagRetain = 1

type dataRecord struct {
	epoch, seq uint64
	retain     bool
	topic      []byte
	payload    []byte
}

func appendData(dst []byte, epoch, seq uint64, retain bool, topic string, payload []byte) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kindData)
	dst = binary.LittleEndian.AppendUint64(dst, epoch)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	var flags byte
	if retain {
		flags |= flagRetain
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(topic)))
	dst = append(dst, topic...)
	dst = append(dst, payload...)
	return wal.EndFrame(dst, start)
}

// dataOverhead is a data frame's size beyond topic and payload.
const dataOverhead = wal.FrameHeaderBytes + 1 + 8 + 8 + 1 + 2

func decodeData(p []byte) (dataRecord, error) {
	if len(p) < 1+8+8+1+2 {
		return dataRecord{}, fmt.Errorf("%w: short data record", errBadRecord)
	}
	d := dataRecord{
		epoch:  binary.LittleEndian.Uint64(p[1:]),
		seq:    binary.LittleEndian.Uint64(p[9:]),
		retain: p[17]&flagRetain != 0,
	}
	n := int(binary.LittleEndian.Uint16(p[18:]))
	if len(p) < 20+n {
		return dataRecord{}, fmt.Errorf("%w: data record topic overruns", errBadRecord)
	}
	d.topic, d.payload = p[20:20+n], p[20+n:]
	return d, nil
}

// appendWords appends a frame of kind followed by little-endian uint64s.
func appendWords(dst []byte, kind byte, words ...uint64) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kind)
	for _, w := range words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return wal.EndFrame(dst, start)
}

func decodeWords(p []byte, n int) ([]uint64, error) {
	if len(p) != 1+8*n {
		return nil, fmt.Errorf("%w: kind %d has %d bytes, want %d", errBadRecord, p[0], len(p), 1+8*n)
	}
	w := make([]uint64, n)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(p[1+8*i:])
	}
	return w, nil
}

const sessionEntryBytes = 8 + 2 + 1

func appendSession(dst []byte, recs []qos2.Record) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kindSession)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(recs)))
	for _, r := range recs {
		dst = binary.LittleEndian.AppendUint64(dst, r.Seq)
		dst = binary.LittleEndian.AppendUint16(dst, r.ID)
		dst = append(dst, byte(r.Step))
	}
	return wal.EndFrame(dst, start)
}

// forEachSession calls fn for each step in a session record.
func forEachSession(p []byte, fn func(qos2.Record)) error {
	if len(p) < 5 {
		return fmt.Errorf("%w: short session record", errBadRecord)
	}
	n := int(binary.LittleEndian.Uint32(p[1:]))
	if len(p) != 5+n*sessionEntryBytes {
		return fmt.Errorf("%w: session record of %d steps has %d bytes", errBadRecord, n, len(p))
	}
	for i := range n {
		e := p[5+i*sessionEntryBytes:]
		r := qos2.Record{Seq: binary.LittleEndian.Uint64(e), ID: binary.LittleEndian.Uint16(e[8:]), Step: qos2.Step(e[10])}
		if r.Step < qos2.StepPublishSent || r.Step > qos2.StepPubcompReceived || r.ID == 0 {
			return fmt.Errorf("%w: session step %d id %d", errBadRecord, r.Step, r.ID)
		}
		fn(r)
	}
	return nil
}
