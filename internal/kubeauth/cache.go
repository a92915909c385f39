package kubeauth

import (
	"container/list"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"
)

// cacheKey is an HMAC-SHA256 under a key drawn at random when the Auth is
// built. Caches are keyed by it, never by a token: a token is not kept in
// memory past its request, and a heap dump of the caches does not even
// allow guessing a token offline (the HMAC key changes every start).
type cacheKey [sha256.Size]byte

// keyer derives cache keys. Every part is length-prefixed, so that no two
// different lists of parts share an encoding.
type keyer struct{ secret []byte }

func (k keyer) key(parts ...string) cacheKey {
	mac := hmac.New(sha256.New, k.secret)
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		mac.Write(n[:])
		mac.Write([]byte(p))
	}
	var out cacheKey
	mac.Sum(out[:0])
	return out
}

// ttlCache is a bounded least-recently-used cache whose entries expire.
// When full, the least recently used entry makes room.
type ttlCache[V any] struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *cacheEntry[V], most recently used first
	entries map[cacheKey]*list.Element
}

type cacheEntry[V any] struct {
	key     cacheKey
	value   V
	expires time.Time
}

func newTTLCache[V any](maxEntries int) *ttlCache[V] {
	return &ttlCache[V]{max: maxEntries, order: list.New(), entries: make(map[cacheKey]*list.Element)}
}

// get returns the value of k unless it is missing or expired at now.
func (c *ttlCache[V]) get(k cacheKey, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.entries[k]
	if !ok {
		return zero, false
	}
	e := el.Value.(*cacheEntry[V])
	if !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.entries, k)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.value, true
}

// put stores v under k until now+ttl; a ttl <= 0 stores nothing.
func (c *ttlCache[V]) put(k cacheKey, v V, ttl time.Duration, now time.Time) {
	if ttl <= 0 || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		e := el.Value.(*cacheEntry[V])
		e.value, e.expires = v, now.Add(ttl)
		c.order.MoveToFront(el)
		return
	}
	for c.order.Len() >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry[V]).key)
	}
	c.entries[k] = c.order.PushFront(&cacheEntry[V]{key: k, value: v, expires: now.Add(ttl)})
}

// remove forgets k.
func (c *ttlCache[V]) remove(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.Remove(el)
		delete(c.entries, k)
	}
}

// len is the number of entries, expired ones included until looked up or
// evicted.
func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
