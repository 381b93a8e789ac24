package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/operators/io/source"
)

// runShared measures ingest over N connections of one shared subscription
// (source.SharedMQTT, connections = N) against the plain MQTT source, at
// the source level: the agent's ingest log is stood in for by a file that
// gets each batch's payloads and, with -fsync, one fsync per batch before
// the batch is acked (the group commit of ack = "after_fsync").
func runShared(args []string) error {
	fs := flag.NewFlagSet("shared", flag.ContinueOnError)
	n := fs.Int("n", 200_000, "readings in the backlog each run drains")
	conns := fs.String("connections", "1,2,3,4", "connection counts to run (1 also runs the plain MQTT source)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "eddybench-shared-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	br, err := startBroker(tmp)
	if err != nil {
		return err
	}
	defer br.stop()
	t := newTable("source", "ack", "readings/s", "source-process CPU", "mosquitto CPU", "received/published")
	type run struct {
		name  string
		conns int // 0: plain MQTT source
	}
	var runs []run
	for _, c := range splitList(*conns) {
		var k int
		if _, err := fmt.Sscan(c, &k); err != nil {
			return err
		}
		if k == 1 {
			runs = append(runs, run{"MQTT (plain subscription)", 0})
		}
		runs = append(runs, run{fmt.Sprintf("SharedMQTT, %d connection(s)", k), k})
	}
	for _, fsync := range []bool{false, true} {
		for i, r := range runs {
			ack := "after receipt"
			if fsync {
				ack = "after write+fsync per batch"
			}
			progress("shared: %s, %s, %d readings", r.name, ack, *n)
			prefix := fmt.Sprintf("bench/shared-%v-%d", fsync, i)
			mk := func() source.Source {
				o := source.MQTTOptions{Broker: br.url(), ClientID: fmt.Sprintf("eddy-shared-%v-%d", fsync, i), Topics: []string{prefix + "/+"}, QoS: 1}
				if r.conns == 0 {
					return source.NewMQTT(o, nil)
				}
				return source.NewSharedMQTT(o, source.SharedOptions{Connections: r.conns}, nil)
			}
			// Register the sessions, so the backlog is queued for them.
			if err := drain(mk(), 0, "", false, nil); err != nil {
				return err
			}
			if _, err := publishBacklog(br.url(), prefix, 100, *n, 0); err != nil {
				return err
			}
			var got atomic.Int64
			b0, _ := sampleProc(br.pid())
			p0, _ := sampleProc(os.Getpid())
			rate := 0.0
			err := drain(mk(), int64(*n), filepath.Join(tmp, "log"), fsync, func() error {
				var err error
				rate, err = rateBetween(got.Load, int64(*n), 5*time.Minute)
				return err
			}, &got)
			if err != nil {
				return err
			}
			b1, _ := sampleProc(br.pid())
			p1, _ := sampleProc(os.Getpid())
			t.add(r.name, ack, si(rate), cpuPercent(p0, p1), cpuPercent(b0, b1), fmt.Sprintf("%d/%d", got.Load(), *n))
		}
	}
	fmt.Printf("\nShared-subscription ingest ($share/GROUP/TOPIC over N connections, QoS 1, manual acks after the batch) against mosquitto, backlog of %d; %d CPUs, %s\n\n",
		*n, runtime.NumCPU(), runtime.Version())
	t.write(os.Stdout)
	return nil
}

// drain runs src until it is connected and, when total > 0, until it has
// received total messages (counting them in got[0]) while measure runs;
// each batch is written to logPath (fsynced with fsync) before its acks.
func drain(src source.Source, total int64, logPath string, fsync bool, measure func() error, got ...*atomic.Int64) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan []source.Message, 16)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, out) }()
	sr := src.(source.StatsReporter)
	deadline := time.Now().Add(30 * time.Second)
	for !sr.Stats().Connected {
		if time.Now().After(deadline) {
			return fmt.Errorf("source did not connect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if total == 0 {
		cancel()
		return <-done
	}
	var f *os.File
	if logPath != "" {
		var err error
		if f, err = os.Create(logPath); err != nil {
			return err
		}
		defer f.Close()
	}
	consumed := make(chan error, 1)
	go func() {
		var buf []byte
		for got[0].Load() < total {
			batch := <-out
			buf = buf[:0]
			for i := range batch {
				buf = append(buf, batch[i].Payload...)
			}
			if f != nil {
				if _, err := f.Write(buf); err != nil {
					consumed <- err
					return
				}
				if fsync {
					if err := f.Sync(); err != nil {
						consumed <- err
						return
					}
				}
			}
			for i := range batch {
				batch[i].Ack()
			}
			got[0].Add(int64(len(batch)))
		}
		consumed <- nil
	}()
	if err := measure(); err != nil {
		return err
	}
	if err := <-consumed; err != nil {
		return err
	}
	cancel()
	return <-done
}
