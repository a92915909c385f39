package eventfilter

import (
	"container/list"
	"sync"
)

// DefaultCacheSize is a Cache size for a process: more distinct filters
// than a cluster's endpoints are likely to carry; a program takes a few
// KiB.
const DefaultCacheSize = 1024

// Cache keeps compiled programs by their expression, the least recently
// used one leaving first when it is full, so that a fan-out compiles an
// endpoint's filter once per process rather than once per event. A
// refused expression is kept too, with its error. It is safe for
// concurrent use.
type Cache struct {
	size int

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	order   list.List                // front: most recently used
	// compiles counts Compile calls, for tests.
	compiles int
}

type entry struct {
	expr string
	prg  *Program
	err  error
}

// NewCache returns a cache of at most size programs (at least 1).
func NewCache(size int) *Cache {
	return &Cache{size: max(size, 1), entries: make(map[string]*list.Element)}
}

// Program returns Compile(expr), compiling it only when the cache does
// not hold it.
func (c *Cache) Program(expr string) (*Program, error) {
	c.mu.Lock()
	if el, ok := c.entries[expr]; ok {
		c.order.MoveToFront(el)
		e := el.Value.(*entry)
		c.mu.Unlock()
		return e.prg, e.err
	}
	c.compiles++
	c.mu.Unlock()

	// Compiled outside the lock: a slow compile holds no other publish.
	// Two that miss at once both compile, and the second result stays.
	prg, err := Compile(expr)

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[expr]; ok {
		c.order.MoveToFront(el)
		el.Value = &entry{expr: expr, prg: prg, err: err}
		return prg, err
	}
	c.entries[expr] = c.order.PushFront(&entry{expr: expr, prg: prg, err: err})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*entry).expr)
	}
	return prg, err
}

// Len returns how many expressions the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
