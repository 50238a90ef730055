import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost, type Host } from '@dsh/host'
import { MCP_MAX_CONCURRENT_READS, MCP_MAX_WAITING_READS } from '@dsh/protocol/limits'
import type { SessionQuery } from '@dsh/session-query'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, describe, expect, it } from 'vitest'
import type { createMcpServer } from '../src/index.js'
import { ReadTurns } from '../src/read-turns.js'
import { connectClient } from './support.js'

// Read calls take turns: a client that sends many calls without waiting for
// the answers has at most maxConcurrentReads of them read at once and
// maxWaitingReads waiting, and the rest are refused at once (MCP_BUSY). The
// host's query is held open by the test at the store's door, so what runs
// at once is decided by counts, never by timing.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Held {
  readonly host: Host
  /** listSessions calls inside the store now, and the most at once. */
  readonly inside: () => { now: number; peak: number; total: number }
  release(): void
  readonly services: Parameters<typeof createMcpServer>[0]
}

/** A real host whose query's listSessions waits at the door until `release`. */
async function heldHost(): Promise<Held> {
  const root = mkdtempSync(join(tmpdir(), 'dsh-mcp-turns-'))
  cleanups.push(() => rmSync(root, { recursive: true, force: true }))
  const host = await createHost({ root })
  cleanups.push(() => host.dispose())
  host.sessions.create().append('user/message', { text: 'hello' })
  let now = 0
  let peak = 0
  let total = 0
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  const query = host.ctx.require('sessionQuery')
  const held: SessionQuery = Object.create(query, {
    listSessions: {
      value: async (...args: Parameters<SessionQuery['listSessions']>) => {
        now++
        total++
        peak = Math.max(peak, now)
        try {
          await opened
          return await query.listSessions(...args)
        } finally {
          now--
        }
      },
    },
  })
  const services = {
    get: (name: string) => (name === 'sessionQuery' ? held : host.ctx.get(name as never)),
  } as Parameters<typeof createMcpServer>[0]
  return { host, inside: () => ({ now, peak, total }), release: open, services }
}

async function connect(services: Parameters<typeof createMcpServer>[0], options: Parameters<typeof createMcpServer>[1]): Promise<Client> {
  const client = await connectClient(services, options)
  cleanups.push(() => client.close())
  return client
}

/** Polls `check` (10 ms apart, at most 1,000 times). */
async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if (check()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`still not true: ${what}`)
}

const codeOf = (result: Awaited<ReturnType<Client['callTool']>>) =>
  result.isError === true ? (result.structuredContent as { error: { code: string } }).error.code : 'ok'

describe('read calls take turns', () => {
  it('reads at most maxConcurrentReads at once, lets maxWaitingReads wait, refuses the rest with MCP_BUSY, and serves the waiting ones in turn', async () => {
    const held = await heldHost()
    const client = await connect(held.services, { readLimits: { maxConcurrentReads: 2, maxWaitingReads: 3 } })
    const calls = Array.from({ length: 10 }, () => client.callTool({ name: 'list_sessions', arguments: {} }))
    // The five over both caps are answered while the first two are still held in the store.
    await until(() => held.inside().now === 2, 'two reads in the store')
    const refused = await Promise.all(calls.slice(5))
    expect(refused.map(codeOf)).toEqual(Array(5).fill('MCP_BUSY'))
    expect((refused[0]!.content as { text: string }[])[0]!.text).toMatch(
      /^MCP_BUSY: 2 read calls are being answered and 3 wait their turn.*maxConcurrentReads 2, maxWaitingReads 3/,
    )
    expect(held.inside()).toEqual({ now: 2, peak: 2, total: 2 })

    held.release()
    expect((await Promise.all(calls.slice(0, 5))).map(codeOf)).toEqual(Array(5).fill('ok'))
    expect(held.inside()).toEqual({ now: 0, peak: 2, total: 5 })
    // Every turn was handed back: a full round runs again.
    const again = await Promise.all(Array.from({ length: 5 }, () => client.callTool({ name: 'list_sessions', arguments: {} })))
    expect(again.map(codeOf)).toEqual(Array(5).fill('ok'))
  })

  it('drops a waiting call that the client cancels: it never reaches the store and its place is freed', async () => {
    const held = await heldHost()
    const client = await connect(held.services, { readLimits: { maxConcurrentReads: 1, maxWaitingReads: 1 } })
    const first = client.callTool({ name: 'list_sessions', arguments: {} })
    await until(() => held.inside().now === 1, 'the first read in the store')
    const cancel = new AbortController()
    const waiting = client.callTool({ name: 'list_sessions', arguments: {} }, undefined, { signal: cancel.signal })
    // The line is full while it waits (calls reach the turns in the order they were sent).
    expect(codeOf(await client.callTool({ name: 'list_sessions', arguments: {} }))).toBe('MCP_BUSY')
    cancel.abort('not needed')
    await expect(waiting).rejects.toThrow()
    // Its place is free: one more call waits instead of being refused.
    const next = client.callTool({ name: 'list_sessions', arguments: {} })
    held.release()
    expect([await first, await next].map(codeOf)).toEqual(['ok', 'ok'])
    expect(held.inside().total).toBe(2)
  })

  it('defaults to 8 at once and 64 waiting, and refuses limits that are not positive integers', () => {
    const turns = new ReadTurns()
    expect([turns.maxConcurrentReads, turns.maxWaitingReads]).toEqual([MCP_MAX_CONCURRENT_READS, MCP_MAX_WAITING_READS])
    expect([MCP_MAX_CONCURRENT_READS, MCP_MAX_WAITING_READS]).toEqual([8, 64])
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => new ReadTurns({ maxConcurrentReads: bad })).toThrow(expect.objectContaining({ code: 'MCP_INVALID_OPTIONS' }))
      expect(() => new ReadTurns({ maxWaitingReads: bad })).toThrow(expect.objectContaining({ code: 'MCP_INVALID_OPTIONS' }))
    }
  })
})
