// Command shop runs the example shop (package shop) against a waiting room:
//
//	go run ./examples/shop/cmd/shop -room http://127.0.0.3:8080 -queue demo -addr 127.0.0.2:8090
//
// Then allow its origin on the queue (PUT /admin/api/queues/demo {"allowed_origins":
// ["http://127.0.0.2:8090"]}) and open http://127.0.0.2:8090/.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/waitroom/waitroom/examples/shop"
)

func main() {
	room := flag.String("room", "http://127.0.0.1:8080", "the waiting room's base URL")
	queue := flag.String("queue", "demo", "the queue in front of the shop")
	addr := flag.String("addr", "127.0.0.2:8090", "where the shop listens (another site than the room)")
	flag.Parse()
	srv := &http.Server{Addr: *addr, Handler: shop.New(shop.Config{Room: *room, Queue: *queue}), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("example shop on http://%s, waiting room %s, queue %s", *addr, *room, *queue)
	log.Fatal(srv.ListenAndServe())
}
