package source

import (
	"context"
	"testing"
)

func TestPending_PushTakeOrder(t *testing.T) {
	p := newPending()
	for i := range 1300 {
		if !p.push(Message{Topic: "t", Payload: []byte{byte(i)}}, 0) {
			t.Fatal("push without limit refused")
		}
	}
	var got []Message
	var sizes []int
	for b := p.take(MaxBatch); b != nil; b = p.take(MaxBatch) {
		sizes = append(sizes, len(b))
		got = append(got, b...)
	}
	if want := []int{512, 512, 276}; len(sizes) != 3 || sizes[0] != want[0] || sizes[1] != want[1] || sizes[2] != want[2] {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	for i, m := range got {
		if m.Offset != uint64(i+1) || m.Payload[0] != byte(i) {
			t.Fatalf("message %d: offset %d payload %d", i, m.Offset, m.Payload[0])
		}
	}
}

func TestPending_Limit(t *testing.T) {
	p := newPending()
	for i := range 3 {
		if ok := p.push(Message{}, 2); ok != (i < 2) {
			t.Fatalf("push %d with limit 2: ok=%v", i, ok)
		}
	}
}

func TestPending_DeliverRequeuesOnCancel(t *testing.T) {
	p := newPending()
	for range 3 {
		p.push(Message{}, 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.deliver(ctx, make(chan []Message)) // nobody receives
	if n := p.len(); n != 3 {
		t.Fatalf("%d queued after a cancelled delivery, want 3", n)
	}
	out := make(chan []Message, 1)
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		b := <-out
		if len(b) != 3 || b[0].Offset != 1 || b[2].Offset != 3 {
			t.Errorf("redelivered batch %+v", b)
		}
		cancel2()
	}()
	p.deliver(ctx2, out)
}
