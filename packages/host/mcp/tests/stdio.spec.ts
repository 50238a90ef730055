import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { createHost, type Host } from '@dsh/host'
import { MCP_MAX_MESSAGE_BYTES } from '@dsh/protocol/limits'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { BoundedStdioServerTransport, createMcpServer, serveStdio } from '../src/index.js'

// The stdio transport as `dsh mcp` runs it, over a pair of in-process pipes:
// raw JSON-RPC lines in, newline-delimited answers out, refusals on stderr.

let root: string
let host: Host

interface Wire {
  readonly stdin: PassThrough
  /** Resolves the next `count` answers (parsed lines of stdout), in order. */
  answers(count: number): Promise<Record<string, unknown>[]>
  readonly stderr: () => string
  readonly served: Promise<void>
}

function serve(maxMessageBytes?: number): Wire {
  const stdin = new PassThrough()
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let errText = ''
  stderr.on('data', (part: Buffer) => (errText += part.toString()))
  const lines: Record<string, unknown>[] = []
  const waiters: (() => void)[] = []
  let pending = ''
  stdout.on('data', (part: Buffer) => {
    pending += part.toString()
    for (let end = pending.indexOf('\n'); end !== -1; end = pending.indexOf('\n')) {
      lines.push(JSON.parse(pending.slice(0, end)))
      pending = pending.slice(end + 1)
    }
    for (const wake of waiters.splice(0)) wake()
  })
  const served = serveStdio(createMcpServer(host.ctx), {
    stdin,
    stdout,
    stderr,
    ...(maxMessageBytes === undefined ? {} : { maxMessageBytes }),
  })
  let taken = 0
  return {
    stdin,
    stderr: () => errText,
    served,
    async answers(count) {
      while (lines.length < taken + count) await new Promise<void>((resolve) => waiters.push(resolve))
      const out = lines.slice(taken, taken + count)
      taken += count
      return out
    },
  }
}

function line(message: Record<string, unknown>): string {
  return `${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`
}

const initialize = line({
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
})

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'dsh-mcp-stdio-'))
  host = await createHost({ root })
  host.sessions.create().append('user/message', { text: 'hello' })
})

afterEach(async () => {
  await host?.dispose()
  rmSync(root, { recursive: true, force: true })
})

describe('the bounded stdio transport', () => {
  it('answers a message over the cap with a JSON-RPC error under its id, says so once on stderr, and serves the next message', async () => {
    const wire = serve(4096)
    wire.stdin.write(initialize)
    expect((await wire.answers(1))[0]).toMatchObject({ id: 1, result: { serverInfo: { name: 'dsh' } } })
    wire.stdin.write(line({ method: 'notifications/initialized' }))

    // 64 KiB of arguments in 1 KiB pieces, the id last (where the SDK client writes it).
    const big = JSON.stringify({
      method: 'tools/call',
      params: { name: 'list_sessions', arguments: { cwd: 'w'.repeat(65_536) } },
      jsonrpc: '2.0',
      id: 2,
    })
    const bytes = Buffer.from(`${big}\n`)
    for (let at = 0; at < bytes.length; at += 1024) wire.stdin.write(bytes.subarray(at, at + 1024))
    wire.stdin.write(line({ id: 3, method: 'tools/call', params: { name: 'list_sessions', arguments: {} } }))

    const [refused, next] = await wire.answers(2)
    expect(refused).toMatchObject({
      id: 2,
      error: { code: -32600, data: { code: 'MCP_MESSAGE_TOO_LARGE', limit: 4096, bytes: bytes.length - 1 } },
    })
    expect((refused!.error as { message: string }).message).toMatch(/^MCP_MESSAGE_TOO_LARGE: .*cap of 4096 bytes.*--max-message-bytes/)
    expect(next).toMatchObject({ id: 3, result: { structuredContent: { sessions: [expect.anything()] } } })
    const said = wire.stderr().split('\n').filter(Boolean)
    expect(said).toHaveLength(1)
    expect(said[0]).toContain(`refused a ${bytes.length - 1}-byte MCP message (answered request 2)`)
    expect(said[0]).toContain('MCP_MESSAGE_TOO_LARGE')

    wire.stdin.end()
    await wire.served
  })

  it('serves a message of exactly the cap, refuses one byte more, and answers each of several lines in one chunk', async () => {
    const wire = serve(200)
    const fitting = (id: number): string => {
      const head = line({ id, method: 'ping', params: { _meta: { pad: '' } } })
      return line({ id, method: 'ping', params: { _meta: { pad: 'p'.repeat(200 - (head.length - 1)) } } })
    }
    const exact = fitting(1)
    expect(Buffer.byteLength(exact) - 1).toBe(200)
    const over = exact.replace('"pad":"', '"pad":"q').replace('"id":1', '"id":2')
    wire.stdin.write(exact + over + over.replace('"id":2', '"id":3') + line({ id: 4, method: 'ping' }))
    // Refusals are answered at once, served requests when their handler resolves: compare by id.
    const answers = (await wire.answers(4)).sort((a, b) => Number(a.id) - Number(b.id))
    expect(answers.map((answer) => [answer.id, 'error' in answer ? (answer.error as { code: number }).code : 'ok'])).toEqual([
      [1, 'ok'],
      [2, -32600],
      [3, -32600],
      [4, 'ok'],
    ])
    expect(wire.stderr().split('\n').filter(Boolean)).toHaveLength(2)
    wire.stdin.end()
    await wire.served
  })

  it('answers a line that is not JSON with -32700 and one that is not JSON-RPC with -32600, then keeps serving', async () => {
    const wire = serve()
    wire.stdin.write('{"jsonrpc":"2.0","id":1,"method":\n')
    wire.stdin.write('{"id":9,"hello":"there"}\n')
    wire.stdin.write('\n')
    wire.stdin.write(line({ id: 10, method: 'ping' }))
    const [notJson, notRpc, pong] = await wire.answers(3)
    expect(notJson).toEqual({
      jsonrpc: '2.0',
      error: expect.objectContaining({ code: -32700, data: expect.objectContaining({ code: 'MCP_PARSE_ERROR' }) }),
    })
    expect(notRpc).toMatchObject({ jsonrpc: '2.0', id: 9, error: { code: -32600, data: { code: 'MCP_INVALID_MESSAGE' } } })
    expect(pong).toEqual({ jsonrpc: '2.0', id: 10, result: {} })
    expect(wire.stderr().split('\n').filter(Boolean)).toHaveLength(2)
    wire.stdin.end()
    await wire.served
  })

  it('says a refused line on stderr with its control characters escaped and its echo bounded', async () => {
    const wire = serve()
    // A hostile line: an OSC title, a colour, a bell and a carriage return.
    wire.stdin.write('\x1b]0;PWNED\x07\x1b[31mred\r\n')
    // JSON but not JSON-RPC, under a long id holding controls (C0, C1, a bidi override).
    const id = `\x1b[2J\u009b31m\u202e${'i'.repeat(100_000)}`
    wire.stdin.write(`${JSON.stringify({ id, hello: 'there' })}\n`)
    wire.stdin.write(line({ id: 10, method: 'ping' }))
    const [notJson, notRpc, pong] = await wire.answers(3)
    expect(notJson).toMatchObject({ error: { code: -32700, data: { code: 'MCP_PARSE_ERROR' } } })
    // The client is still answered under its id, exactly.
    expect(notRpc).toMatchObject({ id, error: { code: -32600, data: { code: 'MCP_INVALID_MESSAGE' } } })
    expect(pong).toEqual({ jsonrpc: '2.0', id: 10, result: {} })

    const said = wire.stderr().split('\n').filter(Boolean)
    expect(said).toHaveLength(2)
    for (const text of said) {
      // No control character reaches the terminal (the newline ending each line was split off above).
      // biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence
      expect(text).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/)
      expect(text.length).toBeLessThan(2_500)
    }
    expect(said[0]).toContain('MCP_PARSE_ERROR')
    expect(said[0]).toContain('\\x1b]0;PWNED\\x07')
    expect(said[1]).toContain('answered request "\\u001b[2J\\x9b31m\\u202eiii')
    expect(said[1]).toContain('…)')
    wire.stdin.end()
    await wire.served
  })

  it('defaults to the protocol cap and refuses a cap that is not a positive integer', () => {
    expect(MCP_MAX_MESSAGE_BYTES).toBe(10 * 1024 * 1024)
    for (const bad of [0, -1, 1.5, Number.NaN])
      expect(() => new BoundedStdioServerTransport({ maxMessageBytes: bad })).toThrow(
        expect.objectContaining({ code: 'MCP_INVALID_OPTIONS' }),
      )
  })
})
