import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost, type Host } from '@dsh/host'
import { type HistoryPageBody, historyPage } from '@dsh/protocol'
import { ELIDED_EVENT_TYPE, HISTORY_PAGE_MAX_BYTES } from '@dsh/protocol/limits'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, describe, expect, it } from 'vitest'
import { createMcpServer } from '../src/index.js'
import { connectClient } from './support.js'

// A show_session page is capped in bytes as the HTTP history routes cap
// theirs: a page of large events stops before the one that would pass the
// cap and continues from there, and an event alone over it is elided.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function open(): Promise<Host> {
  const root = mkdtempSync(join(tmpdir(), 'dsh-mcp-page-'))
  cleanups.push(() => rmSync(root, { recursive: true, force: true }))
  const host = await createHost({ root })
  cleanups.push(() => host.dispose())
  return host
}

async function connect(host: Host, options: Parameters<typeof createMcpServer>[1] = {}): Promise<Client> {
  const client = await connectClient(host.ctx, options)
  cleanups.push(() => client.close())
  return client
}

async function page(client: Client, args: Record<string, unknown>): Promise<HistoryPageBody> {
  const result = await client.callTool({ name: 'show_session', arguments: args })
  expect(result.isError ?? false, JSON.stringify(result.content).slice(0, 500)).toBe(false)
  return historyPage.parse(result.structuredContent)
}

const bytesOf = (events: readonly unknown[]) => events.reduce<number>((sum, event) => sum + Buffer.byteLength(JSON.stringify(event)), 0)

describe('show_session pages within a byte cap', () => {
  it('stops a page before the event that would pass maxHistoryPageBytes, pages through every event once, and elides one alone over it', async () => {
    const host = await open()
    const session = host.sessions.create()
    for (let i = 0; i < 10; i++) session.append('user/message', { text: `${i}`.repeat(1_000) })
    session.append('user/message', { text: 'h'.repeat(10_000) })
    session.append('user/message', { text: 'last' })
    const client = await connect(host, { maxHistoryPageBytes: 4_096 })

    const first = await page(client, { id: session.id, limit: 100 })
    // The newest event, the huge one in its elided form, then as many 1 KB events as fit: three (about 1,070 bytes each).
    expect(first.events.map((event) => [event.seq, event.type])).toEqual([
      [7, 'user/message'],
      [8, 'user/message'],
      [9, 'user/message'],
      [10, ELIDED_EVENT_TYPE],
      [11, 'user/message'],
    ])
    expect(first.events[3]!.data).toEqual({ elided: { bytes: expect.any(Number), reason: 'page-too-large', type: 'user/message' } })
    expect(bytesOf(first.events)).toBeLessThanOrEqual(4_096)
    expect(bytesOf(first.events) + 1_070).toBeGreaterThan(4_096)
    expect(first).toMatchObject({ nextBefore: 7, total: 12 })

    const seen = first.events.map((event) => event.seq)
    let before = first.nextBefore
    for (let pages = 0; before !== undefined; pages++) {
      expect(pages, 'pages to the start of the log').toBeLessThan(12)
      const next = await page(client, { id: session.id, before, limit: 100 })
      expect(bytesOf(next.events)).toBeLessThanOrEqual(4_096)
      expect(next.events.length).toBeGreaterThan(0)
      seen.unshift(...next.events.map((event) => event.seq))
      before = next.nextBefore
    }
    expect(seen).toEqual(Array.from({ length: 12 }, (_, i) => i))
  })

  it('caps at HISTORY_PAGE_MAX_BYTES by default, the HTTP history routes cap', async () => {
    const host = await open()
    const session = host.sessions.create()
    const half = Math.ceil(HISTORY_PAGE_MAX_BYTES / 2)
    session.append('user/message', { text: 'a'.repeat(half) })
    session.append('user/message', { text: 'b'.repeat(half) })
    const client = await connect(host)
    const answer = await page(client, { id: session.id })
    expect(answer.events.map((event) => event.seq)).toEqual([1])
    expect(answer.nextBefore).toBe(1)
    expect(bytesOf(answer.events)).toBeLessThanOrEqual(HISTORY_PAGE_MAX_BYTES)
  })

  it('refuses a cap that is not a positive integer', async () => {
    const host = await open()
    for (const bad of [0, -1, 1.5, Number.NaN])
      expect(() => createMcpServer(host.ctx, { maxHistoryPageBytes: bad })).toThrow(
        expect.objectContaining({ code: 'MCP_INVALID_OPTIONS' }),
      )
  })
})
