package keyed

import "encoding/binary"

// A pipeline whose per-key expressions read control.* gives each Reading
// the control values captured when it arrived (Reading.Control), and they
// wait with it in the buffer: in memory as one blob, uvarint(len(control))
// | control | payload, and in the backend as that blob after the format
// byte bufferFormatControl. The operator does not read them.
const bufferFormatControl = 2

// withControl returns the blob of r's control values and payload, in a
// buffer reused by the next call.
func (o *Operator) withControl(r *Reading) []byte {
	o.blob = binary.AppendUvarint(o.blob[:0], uint64(len(r.Control)))
	o.blob = append(o.blob, r.Control...)
	o.blob = append(o.blob, r.Payload...)
	return o.blob
}

// memoryFormat is the format of the buffered entries held in memory:
// those Process pushed (as stored entries read back name theirs).
func (o *Operator) memoryFormat() byte {
	if o.opts.Control {
		return bufferFormatControl
	}
	return bufferFormat
}

// splitBuffered returns the payload and control values of a buffered
// entry b of format f. A reading buffered without control values (by a
// pipeline that read none) has none: its expressions see every control
// value missing, as before the first control message.
func splitBuffered(f byte, b []byte) (payload, control []byte, err error) {
	switch f {
	case bufferFormat:
		return b, nil, nil
	case bufferFormatControl:
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, nil, errBuffer
		}
		end := k + int(n)
		return b[end:], b[k:end:end], nil
	}
	return nil, nil, errBuffer
}
