import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answer, type ModelServer, startModelServer } from '@dsh/driver-openai/testing'
import { searchPage, sessionListPage, subagentList } from '@dsh/protocol'
import { MCP_MAX_MESSAGE_BYTES } from '@dsh/protocol/limits'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'

// `dsh mcp` as an MCP client runs it: the SDK's own client spawns the built
// CLI over stdio, on a root made by `dsh demo`, and every read tool answers
// exactly what the matching `dsh … --json` command prints: the protocol's wire
// body (the HTTP API's body for the same request; cli.e2e.spec.ts compares those).
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')

let dir: string
let root: string
let parent: string
const clients: Client[] = []

function dsh(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stdout, stderr })
    })
  })
}

async function json(...args: string[]): Promise<unknown> {
  const result = await dsh(...args, '--json', '--root', root)
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout)
}

async function connect(...flags: string[]): Promise<Client> {
  return connectWith({}, ...flags)
}

async function connectWith(env: Record<string, string>, ...flags: string[]): Promise<Client> {
  return (await connectWatched(env, ...flags)).client
}

/** A client of `dsh mcp`, with the server's stderr as it arrives: `lines()` so far, `nextLine()` resolving the next complete one. */
async function connectWatched(
  env: Record<string, string>,
  ...flags: string[]
): Promise<{ client: Client; lines: () => string[]; nextLine: () => Promise<string> }> {
  const { DSH_API_KEY: _a, OPENAI_API_KEY: _b, ...inherited } = process.env as Record<string, string>
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, 'mcp', '--root', root, ...flags],
    env: { ...inherited, ...env },
    stderr: 'pipe',
  })
  let text = ''
  const waiting: (() => void)[] = []
  transport.stderr!.on('data', (part: Buffer) => {
    text += part.toString()
    for (const wake of waiting.splice(0)) wake()
  })
  const lines = (): string[] => text.split('\n').slice(0, -1)
  let read = 0
  const nextLine = async (): Promise<string> => {
    while (lines().length <= read) await new Promise<void>((resolve) => waiting.push(resolve))
    return lines()[read++]!
  }
  const client = new Client({ name: 'dsh-e2e', version: '1.0.0' })
  await client.connect(transport)
  clients.push(client)
  return { client, lines, nextLine }
}

/** The code of a tool error result, or undefined for a success. */
function errorCode(result: Awaited<ReturnType<Client['callTool']>>): string | undefined {
  return result.isError === true ? (result.structuredContent as { error: { code: string } }).error.code : undefined
}

async function structured(client: Client, name: string, args: Record<string, unknown>): Promise<unknown> {
  const result = await client.callTool({ name, arguments: args })
  expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
  return result.structuredContent
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-mcp-'))
  root = join(dir, 'demo')
  const demo = await dsh('demo', '--json', '--root', root)
  expect(demo.code, demo.stderr).toBe(0)
  const listed = (await json('sessions')) as { sessions: { header: { id: string; origin?: string } }[] }
  const parents = await Promise.all(
    listed.sessions
      .filter((record) => record.header.origin === undefined)
      .map(async (record) => ({
        id: record.header.id,
        rows: ((await json('agents', record.header.id)) as { rows: unknown[] }).rows.length,
      })),
  )
  parent = parents.sort((a, b) => b.rows - a.rows)[0]!.id
})

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close()
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('dsh mcp', () => {
  it('lists the read tools, and the control tools only with --allow-control', async () => {
    const reader = await connect()
    expect((await reader.listTools()).tools.map((tool) => tool.name).sort()).toEqual([
      'list_agent_definitions',
      'list_agents',
      'list_sessions',
      'search',
      'session_stats',
      'show_session',
    ])
    await reader.close()

    const controller = await connect('--allow-control')
    const tools = (await controller.listTools()).tools
    const names = tools.map((tool) => tool.name)
    for (const name of ['subagent', 'send_message', 'wait_agents', 'interrupt_agent', 'close_agent', 'report', 'compact_session'])
      expect(names).toContain(name)
    expect(names.filter((name) => name === 'list_agents')).toHaveLength(1)
    expect(tools.find((tool) => tool.name === 'subagent')!.inputSchema.required).toEqual(expect.arrayContaining(['session', 'prompt']))
  })

  it('answers each read tool with the wire body the matching dsh --json command prints', async () => {
    const client = await connect()
    const all = await structured(client, 'list_sessions', {})
    expect(all).toEqual(await json('sessions'))
    expect(sessionListPage.parse(all).sessions.length).toBeGreaterThan(3)
    expect(await structured(client, 'list_sessions', { origin: 'subagent', limit: 2 })).toEqual(
      await json('sessions', '--origin', 'subagent', '--limit', '2'),
    )
    expect(await structured(client, 'show_session', { id: parent })).toEqual(await json('show', parent))
    expect(await structured(client, 'show_session', { id: parent, limit: 3 })).toEqual(await json('show', parent, '--limit', '3'))
    const agents = await structured(client, 'list_agents', { id: parent })
    expect(agents).toEqual(await json('agents', parent))
    expect(subagentList.parse(agents)).toMatchObject({ parentId: parent, scope: 'children' })
    expect((agents as { rows: unknown[] }).rows.length).toBeGreaterThan(1)
    expect(await structured(client, 'list_agents', { id: parent, scope: 'descendants' })).toEqual(
      await json('agents', parent, '--descendants'),
    )
    const hits = await structured(client, 'search', { text: 'build' })
    expect(hits).toEqual(await json('search', 'build'))
    const sessionHits = searchPage.parse(hits)
    expect(sessionHits.kind).toBe('sessions')
    expect(sessionHits.hits.length).toBeGreaterThan(0)
    const events = await structured(client, 'search', { text: 'build', kind: 'events' })
    expect(events).toEqual(await json('search', 'build', '--events'))
    expect(searchPage.parse(events).kind).toBe('events')

    // With a price table, the same as the commands given the same table: every listing entry and catalog row priced.
    const prices = join(dir, 'prices.json')
    writeFileSync(prices, JSON.stringify({ currency: 'USD', providers: { p: { m: { input: 1, output: 2 } } } }))
    const priced = await connect('--prices', prices)
    expect(await structured(priced, 'list_sessions', {})).toEqual(await json('sessions', '--prices', prices))
    const pricedAgents = await structured(priced, 'list_agents', { id: parent, scope: 'descendants' })
    expect(pricedAgents).toEqual(await json('agents', parent, '--descendants', '--prices', prices))
    expect(subagentList.parse(pricedAgents).rows.every((row) => 'cost' in row)).toBe(true)
    expect((await priced.listTools()).tools.find((tool) => tool.name === 'session_stats')?.description).toContain(
      "the server's price table",
    )
  })

  it('answers bad input with a tool error carrying the code, and keeps serving', async () => {
    const client = await connect()
    const bad = await client.callTool({ name: 'show_session', arguments: { id: 42 } })
    expect(bad.isError).toBe(true)
    expect(bad.structuredContent).toMatchObject({ error: { code: 'MCP_INVALID_INPUT' } })
    const control = await client.callTool({ name: 'subagent', arguments: { session: parent, prompt: 'x' } })
    expect(control.structuredContent).toMatchObject({ error: { code: 'MCP_UNKNOWN_TOOL' } })
    const missing = await client.callTool({ name: 'list_agents', arguments: { id: 'no-such-session' } })
    expect(missing.isError ?? false).toBe(false)
    expect(((await structured(client, 'list_sessions', {})) as { sessions: unknown[] }).sessions.length).toBeGreaterThan(3)
  })

  it('with --allow-control, starts a child run by a model as the named session; only its ancestors may interrupt it', async () => {
    let server: ModelServer | undefined
    try {
      server = await startModelServer(() => answer(['Counted ', '7 wombats.']))
      const client = await connectWith(
        { DSH_API_KEY: 'sk-mcp-e2e' },
        '--allow-control',
        '--base-url',
        server.baseURL,
        '--model',
        'child-model',
      )
      const started = (await structured(client, 'subagent', { session: parent, prompt: 'Count the wombats', label: 'counter' })) as {
        id: string
        status: string
        result?: string
      }
      expect(started).toMatchObject({ status: 'completed', result: 'Counted 7 wombats.', mode: 'one-shot', label: 'counter' })
      expect(server.requests.map((request) => request.body.model)).toEqual(['child-model'])
      const rows = ((await structured(client, 'list_agents', { id: parent })) as { rows: { id: string; kind: string; label?: string }[] })
        .rows
      expect(rows.find((row) => row.id === started.id)).toMatchObject({ label: 'counter' })

      // A sibling is not an ancestor of the new child: it may not interrupt it.
      const stranger = rows.find((row) => row.kind === 'child' && row.id !== started.id)!.id
      const refused = await client.callTool({ name: 'interrupt_agent', arguments: { session: stranger, id: started.id } })
      expect(refused.structuredContent).toMatchObject({ error: { code: 'SUBAGENT_UNAUTHORIZED' } })
    } finally {
      for (const client of clients.splice(0)) await client.close()
      await server?.close()
    }
    // The child is in the root for every other command too.
    const listed = (await json('agents', parent)) as { rows: { label?: string }[] }
    expect(listed.rows.map((row) => row.label)).toContain('counter')
  })

  it('with --allow-control --dialect harness, serves the harness-dialect tools and list_agents as such a model reads it', async () => {
    let server: ModelServer | undefined
    try {
      // The background child's model request hangs: it is running until it is interrupted.
      server = await startModelServer((request) =>
        request.body.messages.at(-1)?.content === 'Count again'
          ? { kind: 'stream', content: ['Counting'], hangAfter: 1 }
          : answer(['Counted ', '7 wombats.']),
      )
      const client = await connectWith(
        { DSH_API_KEY: 'sk-mcp-e2e' },
        '--allow-control',
        '--dialect',
        'harness',
        '--base-url',
        server.baseURL,
      )
      const tools = (await client.listTools()).tools
      // The dialect names the model-facing subagent tools only; dsh's own read and operator tools
      // (session_stats, compact_session, ...) keep their names in every dialect.
      expect(tools.map((tool) => tool.name).sort()).toEqual([
        'compact_session',
        'interrupt_agent',
        'list_agent_definitions',
        'list_agents',
        'list_sessions',
        'report',
        'search',
        'send_message',
        'session_stats',
        'show_session',
        'subagent',
      ])
      expect(tools.find((tool) => tool.name === 'subagent')!.inputSchema.required).toEqual(['session', 'description', 'prompt'])
      expect(tools.find((tool) => tool.name === 'send_message')!.inputSchema.required).toEqual(['session', 'subagent_id', 'message'])

      const waited = await client.callTool({
        name: 'subagent',
        arguments: { session: parent, description: 'wombat counter', prompt: 'Count the wombats', run_in_background: false },
      })
      expect(waited.content).toEqual([{ type: 'text', text: 'Counted 7 wombats.' }])
      const started = (await structured(client, 'subagent', {
        session: parent,
        description: 'background counter',
        prompt: 'Count again',
      })) as {
        text: string
        subagentId: string
      }
      expect(started.text).toBe(`started subagent ${started.subagentId}`)
      await server.hung()
      // The read tool's text is the harness rendering: continuable children only (the waited one-shot is left out).
      const listed = await client.callTool({ name: 'list_agents', arguments: { id: parent } })
      const text = (listed.content as { text: string }[])[0]!.text
      expect(text.split('\n')).toContain(`${started.subagentId} [running] — background counter`)
      expect(text).not.toContain('wombat counter')
      for (const line of text.split('\n')) expect(line).toMatch(/^\S+ \[(running|idle|ready|diagnostic: \w+)\]( — .*)?$/)
      // interrupt_agent answers while the child's request is still open (the stop is requested, not awaited).
      expect(await structured(client, 'interrupt_agent', { session: parent, agent_id: started.subagentId })).toEqual({
        text: `interrupt requested for agent ${started.subagentId}`,
        agentId: started.subagentId,
        accepted: true,
        running: true,
      })
    } finally {
      for (const client of clients.splice(0)) await client.close()
      await server?.close()
    }
  })

  it('refuses an unknown --dialect and a limit that is not a positive integer with CLI_USAGE', async () => {
    for (const flags of [
      ['--dialect', 'claude'],
      ['--max-children', '0'],
      ['--max-concurrent-runs', 'many'],
      ['--max-message-bytes', '-5'],
      ['--max-children', '99999999999999999999'],
    ]) {
      const result = await dsh('mcp', ...flags, '--json', '--root', root)
      expect(result.code, flags.join(' ')).toBe(2)
      expect(JSON.parse(result.stdout).error.code).toBe('CLI_USAGE')
    }
  })

  it('answers a message over the cap with a JSON-RPC error naming it and one stderr line, then keeps serving', async () => {
    const { client, lines, nextLine } = await connectWatched({})
    // Arguments as long as the default cap put the message past it; the SDK client writes the request's id last.
    const refused = client.callTool({ name: 'list_sessions', arguments: { cwd: 'w'.repeat(MCP_MAX_MESSAGE_BYTES) } })
    await expect(refused).rejects.toMatchObject({ code: -32600 })
    await expect(refused).rejects.toThrow(`cap of ${MCP_MAX_MESSAGE_BYTES} bytes per message`)
    const said = await nextLine()
    expect(said).toMatch(/^dsh: refused a \d+-byte MCP message \(answered request \d+\): MCP_MESSAGE_TOO_LARGE: /)
    expect(((await structured(client, 'list_sessions', {})) as { sessions: unknown[] }).sessions.length).toBeGreaterThan(3)
    expect(lines().filter((line) => line.includes('MCP_MESSAGE_TOO_LARGE'))).toHaveLength(1)

    // --max-message-bytes sets the cap: a small one refuses what the default serves.
    const small = await connectWatched({}, '--max-message-bytes', '4096')
    await expect(small.client.callTool({ name: 'list_sessions', arguments: { cwd: 'w'.repeat(5000) } })).rejects.toThrow(
      'cap of 4096 bytes per message',
    )
    expect(await small.nextLine()).toContain('MCP_MESSAGE_TOO_LARGE')
    expect(await structured(small.client, 'list_sessions', { cwd: 'w'.repeat(1000) })).toEqual({ sessions: [] })
  })

  it('with --allow-control --max-children N, refuses a spawn past N with MCP_CHILD_LIMIT and the catalog holds exactly N', async () => {
    const before = ((await json('agents', parent)) as { rows: unknown[] }).rows.length
    const cap = before + 2
    let server: ModelServer | undefined
    try {
      server = await startModelServer(() => answer(['Counted.']))
      const client = await connectWith(
        { DSH_API_KEY: 'sk-mcp-e2e' },
        '--allow-control',
        '--base-url',
        server.baseURL,
        '--max-children',
        String(cap),
      )
      const codes: (string | undefined)[] = []
      for (let i = 0; i < 4; i++)
        codes.push(errorCode(await client.callTool({ name: 'subagent', arguments: { session: parent, prompt: `count ${i}` } })))
      expect(codes).toEqual([undefined, undefined, 'MCP_CHILD_LIMIT', 'MCP_CHILD_LIMIT'])
      expect(server.requests).toHaveLength(2)
    } finally {
      for (const client of clients.splice(0)) await client.close()
      await server?.close()
    }
    expect(((await json('agents', parent)) as { rows: unknown[] }).rows).toHaveLength(cap)
  })

  it('with --allow-control --max-concurrent-runs M, refuses a spawn while M child runs are open with MCP_RUN_LIMIT, and admits one once a run ends', async () => {
    let server: ModelServer | undefined
    try {
      // Every child's model request hangs: its run stays open until it is interrupted.
      server = await startModelServer(() => ({ kind: 'stream', content: ['Working'], hangAfter: 1 }))
      const client = await connectWith(
        { DSH_API_KEY: 'sk-mcp-e2e' },
        '--allow-control',
        '--base-url',
        server.baseURL,
        '--max-concurrent-runs',
        '2',
      )
      const before = ((await json('agents', parent)) as { rows: unknown[] }).rows.length
      const spawn = (prompt: string) => client.callTool({ name: 'subagent', arguments: { session: parent, prompt, wait: false } })
      const first = (await structured(client, 'subagent', { session: parent, prompt: 'hold 1', wait: false })) as {
        id: string
        status: string
      }
      const second = (await structured(client, 'subagent', { session: parent, prompt: 'hold 2', wait: false })) as {
        id: string
        status: string
      }
      expect([first.status, second.status]).toEqual(['running', 'running'])
      await server.hung(2)
      const refused = await spawn('hold 3')
      expect(errorCode(refused)).toBe('MCP_RUN_LIMIT')
      expect((refused.content as { text: string }[])[0]!.text).toContain('--max-concurrent-runs')
      expect(((await structured(client, 'list_agents', { id: parent })) as { rows: unknown[] }).rows).toHaveLength(before + 2)

      // Interrupt one and wait until it is idle: its slot is free again.
      await structured(client, 'interrupt_agent', { session: parent, id: first.id })
      await structured(client, 'wait_agents', { session: parent, ids: [first.id] })
      expect(errorCode(await spawn('hold 3'))).toBe(undefined)
      expect(errorCode(await spawn('hold 4'))).toBe('MCP_RUN_LIMIT')
      expect(server.requests).toHaveLength(3)
    } finally {
      for (const client of clients.splice(0)) await client.close()
      await server?.close()
    }
  })

  it('shuts down cleanly on SIGTERM and when the client closes stdin', async () => {
    for (const stopWith of ['SIGTERM', 'stdin'] as const) {
      const child = spawn(process.execPath, [bin, 'mcp', '--allow-control', '--root', root], { stdio: ['pipe', 'pipe', 'pipe'] })
      let stdout = ''
      child.stdout.on('data', (part: Buffer) => (stdout += part.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      // One request answered proves the server is up before we stop it.
      child.stdin.write(
        `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } })}\n`,
      )
      for (let attempt = 0; attempt < 600 && !stdout.includes('"id":1'); attempt++) await new Promise((resolve) => setTimeout(resolve, 50))
      expect(stdout).toContain('"serverInfo"')
      if (stopWith === 'SIGTERM') child.kill('SIGTERM')
      else child.stdin.end()
      expect(await exited).toBe(0)
    }
  })
})
