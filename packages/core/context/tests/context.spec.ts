import { describe, expect, it } from 'vitest'
import { Context, definePlugin, isDshError, type Logger, raceAbort, throwIfAborted } from '../src/index.js'

declare module '../src/index.js' {
  interface Services {
    greeter: { greet(name: string): string }
    counter: { count: number }
  }
  interface ContextEvents {
    'test/ping': [value: number]
  }
}

function recordingLogger(): Logger & { errors: unknown[] } {
  const errors: unknown[] = []
  return { errors, warn: () => {}, error: (_message, error) => void errors.push(error) }
}

describe('Context services and plugins', () => {
  it('activation without a required service fails with CONTEXT_SERVICE_UNAVAILABLE naming plugin and service', async () => {
    const ctx = new Context()
    let ran = false
    const plugin = definePlugin({
      name: 'welcome',
      inject: { required: ['greeter'] },
      activate: () => {
        ran = true
      },
    })
    const error = await ctx.activate(plugin).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(isDshError(error, 'CONTEXT_SERVICE_UNAVAILABLE')).toBe(true)
    expect((error as Error).message).toContain("'welcome'")
    expect((error as Error).message).toContain("'greeter'")
    expect(ran).toBe(false)
  })

  it('injects required and optional services onto the typed plugin context', async () => {
    const ctx = new Context()
    ctx.provide('greeter', { greet: (name) => `hi ${name}` })
    let seen: string | undefined
    let optional: unknown = 'unset'
    await ctx.activate(
      definePlugin({
        name: 'user',
        inject: { required: ['greeter'], optional: ['counter'] },
        activate: (c) => {
          seen = c.greeter.greet('ada')
          optional = c.counter
          c.provide('counter', { count: 1 })
        },
      }),
    )
    expect(seen).toBe('hi ada')
    expect(optional).toBeUndefined()
    expect(ctx.get('counter')?.count).toBe(1)
  })

  it('refuses a second provider of one service and lets a withdrawn one be replaced', () => {
    const ctx = new Context()
    const withdraw = ctx.provide('counter', { count: 1 })
    expect(() => ctx.provide('counter', { count: 2 })).toThrowError(expect.objectContaining({ code: 'CONTEXT_SERVICE_CONFLICT' }))
    withdraw()
    ctx.provide('counter', { count: 3 })
    expect(ctx.get('counter')?.count).toBe(3)
  })
})

describe('Context events', () => {
  it('isolates a throwing and a rejecting listener: the others still run and failures are reported', async () => {
    const logger = recordingLogger()
    const ctx = new Context({ logger })
    const seen: number[] = []
    ctx.on('test/ping', () => {
      throw new Error('boom')
    })
    ctx.on('test/ping', async () => {
      throw new Error('async boom')
    })
    ctx.on('test/ping', (value) => void seen.push(value))
    ctx.emit('test/ping', 7)
    await new Promise((resolve) => setImmediate(resolve))
    expect(seen).toEqual([7])
    expect(logger.errors.map((e) => (e as Error).message).sort()).toEqual(['async boom', 'boom'])
  })

  it('emitAsync waits for every listener and returns the failures', async () => {
    const logger = recordingLogger()
    const ctx = new Context({ logger })
    const order: string[] = []
    ctx.on('test/ping', async () => {
      await new Promise((resolve) => setTimeout(resolve, 5))
      order.push('slow')
    })
    ctx.on('test/ping', () => {
      throw new Error('sync')
    })
    const failures = await ctx.emitAsync('test/ping', 1)
    expect(order).toEqual(['slow'])
    expect(failures).toHaveLength(1)
  })

  it('unsubscribe stops delivery', () => {
    const ctx = new Context()
    const seen: number[] = []
    const off = ctx.on('test/ping', (v) => void seen.push(v))
    ctx.emit('test/ping', 1)
    off()
    ctx.emit('test/ping', 2)
    expect(seen).toEqual([1])
  })
})

describe('Context disposal', () => {
  it('runs disposers in reverse order, continuing past a failing one', async () => {
    const logger = recordingLogger()
    const ctx = new Context({ logger })
    const order: string[] = []
    ctx.onDispose(() => void order.push('files closed'))
    ctx.onDispose(() => {
      throw new Error('flaky')
    })
    ctx.onDispose(async () => void order.push('persistence flushed'))
    await ctx.dispose()
    expect(order).toEqual(['persistence flushed', 'files closed'])
    expect(logger.errors).toHaveLength(1)
    expect(() => ctx.provide('counter', { count: 1 })).toThrowError(expect.objectContaining({ code: 'CONTEXT_DISPOSED' }))
  })
})

describe('cancellation helpers', () => {
  it('throwIfAborted throws CANCELLED only when aborted', () => {
    const controller = new AbortController()
    expect(() => throwIfAborted(controller.signal)).not.toThrow()
    controller.abort()
    expect(() => throwIfAborted(controller.signal)).toThrowError(expect.objectContaining({ code: 'CANCELLED' }))
  })

  it('raceAbort rejects a read that settles after the abort', async () => {
    const controller = new AbortController()
    let resolve!: (v: number) => void
    const pending = raceAbort(new Promise<number>((r) => (resolve = r)), controller.signal)
    controller.abort()
    resolve(1)
    await expect(pending).rejects.toMatchObject({ code: 'CANCELLED' })
    await expect(raceAbort(Promise.resolve(2), new AbortController().signal)).resolves.toBe(2)
  })
})
