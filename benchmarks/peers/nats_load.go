// A load client for NATS JetStream, the peer in benchmarks/vs_nats.py.
//
// Modes (1 KiB bodies, one stream of file storage per run, created here):
//
//	async  PublishAsync with --inflight acks outstanding; --warmup s, then --seconds s
//	       counted; with --total, exactly that many messages instead
//	sync   Publish, one at a time (rate, p50, p99)
//	fetch  a durable pull consumer (AckNone) drained with Fetch(--batch) by --inflight
//	       subscriptions until --total messages came back (the first 10% warm up)
//
// Prints one JSON object, including the stream's message count at the end.
//
// Built against Debian's golang-github-nats-io-go-nats-dev (GOPATH mode):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o nats_load nats_load.go
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

type result struct {
	Mode          string  `json:"mode"`
	Inflight      int     `json:"inflight"`
	Messages      int64   `json:"messages"`
	Seconds       float64 `json:"seconds"`
	MessagesPerS  float64 `json:"messages_per_s"`
	P50us         float64 `json:"p50_us"`
	P99us         float64 `json:"p99_us"`
	MessagesAll   int64   `json:"messages_all"`
	Failed        int64   `json:"failed"`
	FirstFailure  string  `json:"first_failure"`
	StreamMsgs    uint64  `json:"stream_messages"`
	LatencyCount  int     `json:"latency_count"`
	ServerVersion string  `json:"server_version"`
}

const maxLatencies = 2_000_000

var (
	url      = flag.String("url", "nats://127.0.0.1:4222", "server")
	mode     = flag.String("mode", "async", "async, sync or fetch")
	stream   = flag.String("stream", "BENCH", "stream name (subject: the same, lower case)")
	inflight = flag.Int("inflight", 64, "acks outstanding (async) or fetches outstanding (fetch)")
	batch    = flag.Int("batch", 32, "messages per Fetch")
	bodySize = flag.Int("body", 1024, "body bytes")
	seconds  = flag.Float64("seconds", 5, "counted seconds")
	warmup   = flag.Float64("warmup", 1, "seconds before counting")
	total    = flag.Int64("total", 0, "send exactly this many (async) or drain this many (fetch)")
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "nats_load: "+format+"\n", args...)
	os.Exit(1)
}

func percentile(sorted []time.Duration, fraction float64) float64 {
	if len(sorted) == 0 {
		return -1
	}
	i := int(float64(len(sorted)) * fraction)
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return float64(sorted[i].Nanoseconds()) / 1000
}

// window says whether a moment falls in the counted window
type window struct{ from, to time.Time }

func (w window) holds(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

func main() {
	flag.Parse()
	subject := "bench." + *stream
	nc, err := nats.Connect(*url)
	if err != nil {
		fail("connect %s: %v", *url, err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(4 * *inflight))
	if err != nil {
		fail("jetstream: %v", err)
	}
	if *mode != "fetch" {
		_, err = js.AddStream(&nats.StreamConfig{
			Name: *stream, Subjects: []string{subject}, Storage: nats.FileStorage,
		})
		if err != nil {
			fail("add stream %s: %v", *stream, err)
		}
	}
	body := make([]byte, *bodySize)
	for i := range body {
		body[i] = 'x'
	}
	res := result{Mode: *mode, Inflight: *inflight, ServerVersion: nc.ConnectedServerVersion()}
	var latencies []time.Duration
	var counted window

	switch *mode {
	case "async":
		latencies, counted = runAsync(js, subject, body, &res)
	case "sync":
		latencies, counted = runSync(js, subject, body, &res)
	case "fetch":
		latencies, counted = runFetch(js, subject, &res)
	default:
		fail("unknown --mode %s", *mode)
	}
	res.Seconds = counted.to.Sub(counted.from).Seconds()
	if res.Seconds > 0 {
		res.MessagesPerS = float64(res.Messages) / res.Seconds
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	res.P50us, res.P99us = percentile(latencies, 0.5), percentile(latencies, 0.99)
	res.LatencyCount = len(latencies)
	info, err := js.StreamInfo(*stream)
	if err != nil {
		fail("stream info %s: %v", *stream, err)
	}
	res.StreamMsgs = info.State.Msgs
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

func record(res *result, err error) {
	if res.Failed == 0 {
		res.FirstFailure = err.Error()
	}
	res.Failed++
}

type pending struct {
	future nats.PubAckFuture
	sent   time.Time
}

// runAsync keeps exactly --inflight publishes unacknowledged: a slot is taken before each
// PublishAsync and given back when its ack arrives (acks come back in order).
func runAsync(js nats.JetStreamContext, subject string, body []byte, res *result) ([]time.Duration, window) {
	slots := make(chan struct{}, *inflight)
	futures := make(chan pending, *inflight)
	var latencies []time.Duration
	var counted window
	start := time.Now()
	counted.from = start.Add(time.Duration(*warmup * float64(time.Second)))
	counted.to = counted.from.Add(time.Duration(*seconds * float64(time.Second)))
	if *total > 0 {
		counted.from, counted.to = start, start.Add(24*time.Hour)
	}
	done := make(chan struct{})
	go func() { // the collector
		defer close(done)
		for p := range futures {
			select {
			case <-p.future.Ok():
				res.MessagesAll++
				now := time.Now()
				if counted.holds(now) {
					res.Messages++
					if len(latencies) < maxLatencies {
						latencies = append(latencies, now.Sub(p.sent))
					}
				}
			case err := <-p.future.Err():
				record(res, err)
			}
			<-slots
		}
	}()
	var sent int64
	for {
		if *total > 0 && sent >= *total {
			break
		}
		slots <- struct{}{}
		now := time.Now()
		if *total == 0 && !now.Before(counted.to) {
			<-slots
			break
		}
		future, err := js.PublishAsync(subject, body)
		if err != nil {
			fail("publish: %v", err)
		}
		futures <- pending{future, now}
		sent++
	}
	close(futures)
	<-done
	if *total > 0 {
		counted.to = time.Now()
		res.Messages = res.MessagesAll
	}
	return latencies, counted
}

func runSync(js nats.JetStreamContext, subject string, body []byte, res *result) ([]time.Duration, window) {
	var latencies []time.Duration
	start := time.Now()
	var counted window
	counted.from = start.Add(time.Duration(*warmup * float64(time.Second)))
	counted.to = counted.from.Add(time.Duration(*seconds * float64(time.Second)))
	for {
		began := time.Now()
		if !began.Before(counted.to) {
			break
		}
		if _, err := js.Publish(subject, body); err != nil {
			record(res, err)
			continue
		}
		res.MessagesAll++
		if counted.holds(began) {
			res.Messages++
			if len(latencies) < maxLatencies {
				latencies = append(latencies, time.Since(began))
			}
		}
	}
	return latencies, counted
}

// runFetch drains --total messages through --inflight subscriptions of one durable
// consumer, each looping Fetch(--batch); the clock starts after the first 10%.
func runFetch(js nats.JetStreamContext, subject string, res *result) ([]time.Duration, window) {
	durable := "bench-" + *stream
	var received, failed int64
	var firstFailure atomic.Value
	var counted window
	var startOnce sync.Once
	warm := *total / 10
	var mu sync.Mutex
	var latencies []time.Duration
	var wg sync.WaitGroup
	subs := make([]*nats.Subscription, *inflight)
	for i := range subs {
		sub, err := js.PullSubscribe(subject, durable, nats.AckNone(), nats.BindStream(*stream))
		if i == 0 && err != nil { // the first creates the consumer, the others bind to it
			fail("pull subscribe: %v", err)
		} else if err != nil {
			sub, err = js.PullSubscribe(subject, durable, nats.Bind(*stream, durable))
			if err != nil {
				fail("pull subscribe: %v", err)
			}
		}
		subs[i] = sub
	}
	for _, sub := range subs {
		wg.Add(1)
		go func(sub *nats.Subscription) {
			defer wg.Done()
			for atomic.LoadInt64(&received) < *total {
				began := time.Now()
				msgs, err := sub.Fetch(*batch, nats.MaxWait(2*time.Second))
				if err == nats.ErrTimeout && atomic.LoadInt64(&received) >= *total {
					return
				}
				if err != nil {
					if atomic.AddInt64(&failed, 1) == 1 {
						firstFailure.Store(err.Error())
					}
					if atomic.LoadInt64(&failed) > 100 {
						return
					}
					continue
				}
				now := time.Now()
				after := atomic.AddInt64(&received, int64(len(msgs)))
				if after >= warm {
					startOnce.Do(func() {
						mu.Lock()
						counted.from = now
						res.Messages = after
						mu.Unlock()
					})
				}
				mu.Lock()
				if !counted.from.IsZero() && counted.from != now && len(latencies) < maxLatencies {
					latencies = append(latencies, now.Sub(began))
				}
				if after >= *total && counted.to.IsZero() {
					counted.to = now
				}
				mu.Unlock()
			}
		}(sub)
	}
	wg.Wait()
	res.MessagesAll = received
	res.Messages = received - res.Messages // counted: after the warm-up mark
	res.Failed = failed
	if v := firstFailure.Load(); v != nil {
		res.FirstFailure = v.(string)
	}
	if counted.to.IsZero() {
		counted.to = time.Now()
	}
	return latencies, counted
}
