package durable_test

import (
	"context"
	"fmt"

	"github.com/goai-sdk/goai/durable"
)

// A producer appends before it delivers and closes the log at the end; a
// client that reconnects with its last offset is served the rest.
func Example() {
	ctx := context.Background()
	var log durable.Log = durable.NewMemory(nil)

	offs, _ := log.Append(ctx, "run-1", [][]byte{
		[]byte(`{"type":"RUN_STARTED"}`),
		[]byte(`{"type":"TEXT_MESSAGE_CONTENT","delta":"Hi"}`),
	})
	log.Append(ctx, "run-1", [][]byte{[]byte(`{"type":"RUN_FINISHED"}`)})
	log.Close(ctx, "run-1")

	// Last-Event-ID: offs[0]
	for e, err := range log.Read(ctx, "run-1", offs[0]) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Printf("id: %s\ndata: %s\n\n", e.Offset, e.Data)
	}
	// Output:
	// id: NWmDaF4i:2
	// data: {"type":"TEXT_MESSAGE_CONTENT","delta":"Hi"}
	//
	// id: NWmDaF4i:3
	// data: {"type":"RUN_FINISHED"}
}

// A driver claims a run and writes through a Fence: once a successor claims
// the run, the predecessor's appends fail and its terminal writes are dropped.
func ExampleFence() {
	ctx := context.Background()
	store := durable.NewMemory(nil)
	store.CreateOrResume(ctx, durable.RunRecord{RunID: "run-1", ThreadID: "thread-1"})

	first, _ := store.Claim(ctx, "run-1")
	old := durable.NewFence(store, first, nil)
	second, _ := store.Claim(ctx, "run-1") // takeover by another host

	_, err := old.Append(ctx, [][]byte{[]byte(`{"type":"RUN_ERROR"}`)})
	fmt.Println(err)
	fmt.Println(second.Epoch)
	// Output:
	// durable: claim of run "run-1" lost: held epoch 1, observed 2
	// 2
}
