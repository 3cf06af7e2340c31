// Command floor is the least work an AG-UI server can do for bench/load:
// for each request it writes one text answer of numbered deltas ("w0 " ..),
// pacing them as the scripted scenario does and stamping each with the time
// it is written, one write and flush per event. It runs no engine, keeps no
// state and reads nothing but the request body, so what bench/load measures
// against it (token latency above all) is what the machine and the client
// cost, which no real server can go below. It serves loopback only and stops
// on SIGINT or SIGTERM.
//
//	floor [-tokens 200] [-delay-ms 0] [-scenario FILE]
//
// With -scenario, the tokens and pacing are those of the first text turn of
// a scenario bench/load -write-scenario wrote (its tool-call turns are left
// out: a floor answers with text only).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	tokens := flag.Int("tokens", 200, "text deltas per answer")
	delayMs := flag.Int("delay-ms", 0, "pause before each delta (ms)")
	scenario := flag.String("scenario", "", "take -tokens and -delay-ms from this bench/load scenario")
	flag.Parse()
	if *scenario != "" {
		var err error
		if *tokens, *delayMs, err = fromScenario(*scenario); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			os.Exit(1)
		}
	}
	if err := run(*tokens, time.Duration(*delayMs)*time.Millisecond); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// fromScenario reads the deltas and the pause before each of the first
// text turn of the scenario in file.
func fromScenario(file string) (tokens, delayMs int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, err
	}
	var sc struct {
		Turns [][]struct {
			Type    string `json:"type"`
			DelayMs int    `json:"delayMs"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		return 0, 0, fmt.Errorf("scenario %s: %w", file, err)
	}
	for _, turn := range sc.Turns {
		for _, c := range turn {
			switch {
			case c.Type == "TEXT_MESSAGE_CONTENT":
				tokens++
			case c.Type == "" && tokens == 0:
				delayMs = c.DelayMs
			}
		}
		if tokens > 0 {
			return tokens, delayMs, nil
		}
	}
	return 0, 0, fmt.Errorf("scenario %s has no text turn", file)
}

func run(tokens int, delay time.Duration) error {
	if tokens < 1 || delay < 0 {
		return fmt.Errorf("need -tokens of at least 1 and a -delay-ms of at least 0")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: answer(tokens, delay)}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	// servers.sh waits for this line, as it does for goai serve's.
	fmt.Printf("serving on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// answer returns the handler: one run of tokens deltas, each delay apart.
func answer(tokens int, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 1<<20)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		var timer *time.Timer
		if delay > 0 {
			timer = time.NewTimer(delay)
			defer timer.Stop()
		}
		buf := make([]byte, 0, 256)
		send := func(head, tail string) bool {
			buf = append(buf[:0], "data: "...)
			buf = append(buf, head...)
			buf = append(buf, `,"timestamp":`...)
			buf = strconv.AppendInt(buf, time.Now().UnixMilli(), 10)
			buf = append(buf, tail...)
			buf = append(buf, "}\n\n"...)
			if _, err := w.Write(buf); err != nil {
				return false
			}
			return rc.Flush() == nil
		}
		ok := send(`{"type":"RUN_STARTED","threadId":"thread-bench","runId":"run-bench"`, "") &&
			send(`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"`, "")
		for j := 0; ok && j < tokens; j++ {
			if timer != nil {
				select {
				case <-timer.C:
					timer.Reset(delay)
				case <-r.Context().Done():
					return
				}
			}
			ok = send(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w`+strconv.Itoa(j)+` "`, "")
		}
		_ = ok && send(`{"type":"TEXT_MESSAGE_END","messageId":"m"`, "") &&
			send(`{"type":"RUN_FINISHED","threadId":"thread-bench","runId":"run-bench"`, `,"finishReason":"stop"`)
	})
}
