package labhost

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestExchangeStoreBounds(t *testing.T) {
	x := newExchange()
	if err := x.open("a"); err != nil {
		t.Fatal(err)
	}
	if err := x.open("a"); err == nil || !strings.HasPrefix(err.Error(), "id:") {
		t.Fatalf("a reused id: %v", err)
	}
	if err := x.put("a", "qps", 3, []int{1}); err != nil {
		t.Fatal(err)
	}
	x.put("a", "buffers", everyone, "all")
	if b, ok := x.get("a", "qps", 3); !ok || string(b) != "[1]" {
		t.Fatalf("qps for 3: %q %v", b, ok)
	}
	if _, ok := x.get("a", "qps", 2); ok {
		t.Fatal("host 2 read the item published for host 3")
	}
	if b, ok := x.get("a", "buffers", 2); !ok || string(b) != `"all"` {
		t.Fatalf("an item for everyone: %q %v", b, ok)
	}
	if err := x.put("nope", "qps", 1, 1); err == nil {
		t.Fatal("put into a request never opened")
	}
	// Full of running requests: refused.
	for i := 1; i < MaxExchangeRequests; i++ {
		if err := x.open(fmt.Sprint("r", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.open("one-more"); err == nil {
		t.Fatal("a request beyond the bound while all run")
	}
	// One finished: the new one takes its place.
	x.finish("a")
	if err := x.open("one-more"); err != nil {
		t.Fatal(err)
	}
	if _, ok := x.get("a", "buffers", 2); ok || x.size() != MaxExchangeRequests {
		t.Fatalf("the finished request's items stayed (%d requests)", x.size())
	}
	// A finished request's items linger, then go.
	x.finish("r1")
	if _, ok := x.get("r1", "x", 0); ok {
		t.Fatal("item never put")
	}
	x.put("r1", "iter-0", everyone, true)
	if _, ok := x.get("r1", "iter-0", 5); !ok {
		t.Fatal("a just-finished request's items are gone: slower members still read them")
	}
	x.mu.Lock()
	x.reqs["r1"].finished = time.Now().Add(-ExchangeLinger - time.Second)
	x.mu.Unlock()
	x.finish("r2")
	if _, ok := x.get("r1", "iter-0", 5); ok {
		t.Fatal("items outlived ExchangeLinger")
	}
}
