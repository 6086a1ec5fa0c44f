// Command shop runs the example shop (package shop) against a waiting room. Its defaults
// fit the zero-config room of `make run` (queue demo, product demo, on localhost:8080):
//
//	go run ./examples/shop/cmd/shop -room http://localhost:8080 -addr 127.0.0.1:8090
//
// examples/shop/README.md gives every step, including the queue's allowed_origins.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/waitroom/waitroom/examples/shop"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "shop:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	room := fs.String("room", "http://localhost:8080", "the waiting room's base URL")
	queue := fs.String("queue", "demo", "the queue in front of the shop")
	product := fs.String("product", "demo", "the room's product the embedded widget orders (a product of -queue)")
	issuer := fs.String("issuer", "waitroom", "the room's token issuer (its WR_ISSUER)")
	addr := fs.String("addr", "127.0.0.1:8090", "where the shop listens: another site than the room (port 0: any free port)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	h, err := shop.New(shop.Config{Room: *room, Queue: *queue, Product: *product, Issuer: *issuer})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("example shop on http://%s (waiting room %s, queue %s, product %s)", ln.Addr(), *room, *queue, *product)
	return srv.Serve(ln)
}
