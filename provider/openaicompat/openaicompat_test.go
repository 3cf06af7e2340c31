package openaicompat_test

import (
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
	"github.com/goai-sdk/goai/provider/openaicompat"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mk(o *wire.Options) chat.Adapter { return openaicompat.New("local-model", o) }

func TestGolden(t *testing.T) {
	wiretest.GoldenDir(t, "stream", "sse", "text/event-stream", mk)
}

func TestTransport(t *testing.T) {
	ok, _ := os.ReadFile("testdata/stream/no_usage_no_done.sse")
	prefix := []byte("data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n")
	wiretest.Suite{
		New: mk, BasePath: "/v1", Path: "/v1/chat/completions", ContentType: "text/event-stream",
		OK: ok, Prefix: prefix, AuthHeader: "Authorization",
		ErrorBody: func(status int, msg string) string {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
			return string(b)
		},
	}.Run(t)
}

func TestName(t *testing.T) {
	a := openaicompat.New("m", &openaicompat.Options{BaseURL: "http://127.0.0.1:1/v1"})
	if a.Name() != "openaicompat" || a.Model() != "m" {
		t.Fatal(a.Name(), a.Model())
	}
	a.NoStreamOptions = true
	b, _ := a.ChatBody(wiretest.Req())
	if string(b) == "" || json.Valid(b) == false {
		t.Fatal("bad body")
	}
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	if _, ok := v["stream_options"]; ok {
		t.Fatal("stream_options sent")
	}
}
