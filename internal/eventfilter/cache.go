package eventfilter

import (
	"sync/atomic"

	"k8s.io/utils/lru"
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
	programs *lru.Cache // expression → entry; safe for concurrent use
	// compiles counts Compile calls, for tests.
	compiles atomic.Int64
}

type entry struct {
	prg *Program
	err error
}

// NewCache returns a cache of at most size programs (at least 1).
func NewCache(size int) *Cache {
	return &Cache{programs: lru.New(max(size, 1))}
}

// Program returns Compile(expr), compiling it only when the cache does
// not hold it.
func (c *Cache) Program(expr string) (*Program, error) {
	if v, ok := c.programs.Get(expr); ok {
		e := v.(entry)
		return e.prg, e.err
	}
	// Compiled outside any lock: a slow compile holds no other publish.
	// Two that miss at once both compile, and the second result stays.
	c.compiles.Add(1)
	prg, err := Compile(expr)
	c.programs.Add(expr, entry{prg: prg, err: err})
	return prg, err
}

// Len returns how many expressions the cache holds.
func (c *Cache) Len() int { return c.programs.Len() }
