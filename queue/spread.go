package queue

import (
	"hash/fnv"
	"sort"
)

// Spreading leadership: every instance computes the same assignment of queues to the live
// instances from the same two lists (the queue names and the live instance ids), so each
// knows which queues it should lead without talking to the others. The assignment is
// rendezvous hashing with bounded loads: a queue goes to the instance that scores highest for
// it, unless that one already has its share (⌈Q/N⌉), then to the next. So 1,000 queues over
// 4 instances give each exactly 250, and an instance leaving moves its own queues and a
// handful of others (5 of 750 in the test). Every queue counts, resting or busy: busy ones
// are spread as the names fall, not counted apart. The lease still decides who leads: a preferred instance
// only tries first (at once when a queue wakes; the others a lease renewal later), and a
// leader that is not preferred hands the lease over (queueLoop.handOver).

// assign returns, for each queue name, the id of the instance preferred to lead it.
func assign(names, ids []string) map[string]string {
	if len(ids) == 0 {
		return nil
	}
	names = append([]string(nil), names...)
	sort.Strings(names)
	n := len(ids)
	share := (len(names) + n - 1) / n
	capacity := share
	load := make(map[string]int, n)
	out := make(map[string]string, len(names))
	type cand struct {
		id    string
		score uint64
	}
	cands := make([]cand, n)
	for _, q := range names {
		for i, id := range ids {
			cands[i] = cand{id, score(q, id)}
		}
		sort.Slice(cands, func(i, j int) bool {
			if cands[i].score != cands[j].score {
				return cands[i].score > cands[j].score
			}
			return cands[i].id < cands[j].id
		})
		for _, c := range cands {
			if load[c.id] < capacity {
				load[c.id]++
				out[q] = c.id
				break
			}
		}
	}
	return out
}

// score is the rendezvous weight of instance id for queue q: FNV-1a of both, mixed
// (splitmix64's finaliser) so that near-identical ids still spread evenly.
func score(q, id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(q))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(id))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
