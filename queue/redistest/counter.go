package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CommandCounter is a go-redis hook that counts the commands a client sends (a pipeline's
// commands one by one): tests that bound what a request or a refresh costs add it to the
// client under test (client.AddHook) and read N.
type CommandCounter struct{ N atomic.Int64 }

func (c *CommandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *CommandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.N.Add(1)
		return next(ctx, cmd)
	}
}

func (c *CommandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.N.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
