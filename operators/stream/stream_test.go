package stream

import (
	"context"
	"testing"
)

func TestEdge_OrderAndPriority(t *testing.T) {
	e := NewEdge(8)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := e.Send(ctx, Message{Kind: Watermark, Watermark: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.SendPriority(ctx, Message{Kind: EndOfInput}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	m, _ := e.Recv()
	if m.Kind != EndOfInput {
		t.Fatalf("priority message not first: %+v", m)
	}
	for i := 0; i < 3; i++ {
		m, ok := e.Recv()
		if !ok || m.Watermark != int64(i) {
			t.Fatalf("message %d: got %+v ok=%v", i, m, ok)
		}
	}
	if _, ok := e.Recv(); ok {
		t.Fatal("closed edge still delivers")
	}
}

func TestEdge_SendBlocksWhenFull(t *testing.T) {
	e := NewEdge(1)
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Send(ctx, Message{Kind: Watermark}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := e.Send(ctx, Message{Kind: Watermark}); err == nil {
		t.Fatal("send to a full edge returned without the consumer")
	}
}

func TestBatch_AppendAccessors(t *testing.T) {
	b := NewBatch(2)
	b.Append([]byte("k1"), 3, 100, []float64{1, 2}, []byte(`{"a":1}`), 7)
	b.Append([]byte("key2"), 5, 200, []float64{3, 4}, []byte(`x`), 8)
	if b.Len() != 2 || string(b.Key(1)) != "key2" || string(b.Payload(0)) != `{"a":1}` || b.RecordValues(1)[1] != 4 {
		t.Fatalf("accessors wrong: %+v", b)
	}
	b.Release()
	c := NewBatch(1)
	if c.Len() != 0 || c.Stride != 1 {
		t.Fatalf("reused batch not empty: %+v", c)
	}
}

func TestBatch_AppendNoAllocSteadyState(t *testing.T) {
	b := NewBatch(3)
	vals := []float64{1, 2, 3}
	key, payload := []byte("sensor-1"), []byte(`{"device":"sensor-1","temp":21.5}`)
	fill := func() {
		for i := 0; i < 512; i++ {
			b.Append(key, 1, int64(i), vals, payload, uint64(i))
		}
	}
	fill()
	allocs := testing.AllocsPerRun(20, func() {
		b.Keys, b.KeyEnds, b.KeyGroups, b.Times = b.Keys[:0], b.KeyEnds[:0], b.KeyGroups[:0], b.Times[:0]
		b.Values, b.Payloads, b.PayloadEnds, b.Offsets = b.Values[:0], b.Payloads[:0], b.PayloadEnds[:0], b.Offsets[:0]
		fill()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 512 appends into a reused batch", allocs)
	}
}
