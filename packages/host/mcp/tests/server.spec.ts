import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost, type Host } from '@dsh/host'
import { historyPage, searchPage, sessionListPage, sessionStatsReport, subagentList } from '@dsh/protocol'
import { listedValues, parsePriceTable, treeListingCosts } from '@dsh/session-stats'
import { createScriptedDriver } from '@dsh/subagent'
import { createListAgentsTool, subagentControlTools } from '@dsh/tool-subagent-control'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { type ControlTool, createMcpServer } from '../src/index.js'
import { connectClient } from './support.js'

let root: string
let host: Host
let client: Client
let parentId: string
/**
 * The children's driver: the fixer's turn is one model call of provider `p`,
 * model `m`, with its usage (priced under a table that knows `p`/`m`); any
 * other child echoes its prompt in a message that reports no usage (its cost
 * is unknown).
 */
const driver = createScriptedDriver(
  (run) => {
    if (run.prompt === 'fix it') return [{ kind: 'step', usage: { input: 500, output: 100 } }]
    const text = `Done: ${run.prompt ?? ''}`
    return [
      { kind: 'chunk', text },
      { kind: 'message', text },
    ]
  },
  { model: { provider: 'p', model: 'm' } },
)

async function connect(options: Parameters<typeof createMcpServer>[1] = {}): Promise<Client> {
  const next = await connectClient(host.ctx, options)
  return next
}

/** The structured result of a successful call. */
async function call(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const result = await client.callTool({ name, arguments: args })
  expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
  return result.structuredContent as Record<string, unknown>
}

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'dsh-mcp-'))
  host = await createHost({ root, driver })
  const parent = host.sessions.create()
  parent.append('user/message', { text: 'find the flaky wombat test' })
  parentId = parent.id
  const first = host.subagents.spawn(parent, { mode: 'one-shot', label: 'scout', context: 'fresh', prompt: 'look for wombats' })
  await first.done
  const second = host.subagents.spawn(parent, { mode: 'continuable', label: 'fixer', context: 'fork', prompt: 'fix it' })
  await second.done
  client = await connect()
})

afterEach(async () => {
  await client?.close()
  await host?.dispose()
  rmSync(root, { recursive: true, force: true })
})

describe('dsh MCP server', () => {
  it('lists the read tools with JSON Schemas from the zod inputs, and no control tools without allowControl', async () => {
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name).sort()).toEqual(['list_agents', 'list_sessions', 'search', 'session_stats', 'show_session'])
    const show = tools.find((tool) => tool.name === 'show_session')!
    expect(show.inputSchema).toMatchObject({
      type: 'object',
      properties: { id: { type: 'string' }, before: { type: 'integer' }, limit: { type: 'integer' } },
      required: ['id'],
      additionalProperties: false,
    })
    for (const tool of tools) expect(tool.description?.length).toBeGreaterThan(40)
  })

  it('answers each read tool with the protocol wire body of what the services answer (the HTTP API body, `dsh --json`)', async () => {
    // The oracle is the protocol schema itself: each answer is the schema's
    // parse of the service value (declared fields only, in schema order).
    const listed = await call('list_sessions', {})
    const all = await host.query.listSessions({})
    // Each entry carries what the host knows without a log read: live views, else the checkpoint cache.
    const sources = {
      sessions: host.sessions,
      projections: host.ctx.require('sessionProjections'),
      cache: host.ctx.get('sessionProjectionCache'),
    }
    const entries = (records: typeof all.records) => {
      const values = listedValues(records, sources)
      return records.map((record, i) => ({ ...record, ...values[i] }))
    }
    expect(JSON.stringify(listed)).toBe(
      JSON.stringify(sessionListPage.parse({ sessions: entries(all.records), nextCursor: all.nextCursor })),
    )
    expect(Object.keys(listed)).toEqual(['sessions'])
    // The parent's title is its first prompt; its tokens are known (none used); no price table, so no cost.
    expect((listed.sessions as { header: { id: string } }[]).find((entry) => entry.header.id === parentId)).toMatchObject({
      title: 'find the flaky wombat test',
      tokens: 0,
      cost: null,
    })
    const first = await call('list_sessions', { parentSession: parentId, limit: 1 })
    const firstPage = await host.query.listSessions({ parentSession: parentId, limit: 1 })
    expect(first).toEqual(sessionListPage.parse({ sessions: entries(firstPage.records), nextCursor: firstPage.nextCursor }))
    expect(first).toMatchObject({ sessions: [expect.anything()], nextCursor: expect.any(String) })

    const shown = await call('show_session', { id: parentId, limit: 2 })
    expect(JSON.stringify(shown)).toBe(JSON.stringify(historyPage.parse(await host.query.readHistory(parentId, { limit: 2 }))))

    const agents = await call('list_agents', { id: parentId })
    const explained = await host.subagents.explainChildren(parentId)
    const rows = explained.map(({ row, parentId: p, depth, rung, tokens, durationMs, startedAt, endedAt, closed }) => ({
      ...row,
      parentId: p,
      depth,
      rung,
      tokens,
      durationMs,
      startedAt,
      endedAt,
      closed,
    }))
    expect(JSON.stringify(agents)).toBe(JSON.stringify(subagentList.parse({ parentId, scope: 'children', rows })))
    expect((agents.rows as { label?: string; rung: number; depth: number }[]).map((row) => [row.label, row.depth])).toEqual([
      ['scout', 1],
      ['fixer', 1],
    ])
    // The text is the table format of list_agents (what `dsh agents` prints).
    const expected = await createListAgentsTool(host.subagents, { format: 'table' }).execute(
      { scope: 'children' },
      { agent: { id: parentId } },
    )
    const text = await client.callTool({ name: 'list_agents', arguments: { id: parentId } })
    expect(text.content).toEqual([{ type: 'text', text: expected.text }])

    // session_stats: the report of the HTTP route, through the catalog's ladder; the tree holds both children.
    const stats = await call('session_stats', { id: parentId, scope: 'descendants' })
    const report = sessionStatsReport.parse(stats)
    expect(report).toMatchObject({ id: parentId, scope: 'descendants', title: 'find the flaky wombat test', cost: null })
    expect(report.sessions.map((s) => [s.depth, s.status])).toEqual([
      [0, 'ok'],
      [1, 'ok'],
      [1, 'ok'],
    ])
    expect(report.rollup).toMatchObject({ sessions: 3, complete: true })
    expect((await call('session_stats', { id: parentId })).sessions).toHaveLength(1)
    const unknown = await client.callTool({ name: 'session_stats', arguments: { id: 'no-such-session' } })
    expect(unknown.isError).toBe(true)

    const hits = await call('search', { text: 'wombats' })
    const sessionHits = await host.query.searchSessions!({ text: 'wombats' })
    expect(JSON.stringify(hits)).toBe(JSON.stringify(searchPage.parse({ kind: 'sessions', ...sessionHits })))
    expect(hits.kind).toBe('sessions')
    expect((hits.hits as unknown[]).length).toBeGreaterThan(0)
    const events = await call('search', { text: 'wombat', kind: 'events' })
    const eventHits = await host.query.searchEvents!({ text: 'wombat' })
    expect(JSON.stringify(events)).toBe(JSON.stringify(searchPage.parse({ kind: 'events', ...eventHits })))
    expect(events.kind).toBe('events')
  })

  it('with a price table, prices cost in list_sessions, list_agents and session_stats as the HTTP API does, and says so', async () => {
    const prices = await parsePriceTable({ currency: 'USD', providers: { p: { m: { input: 1, output: 4 } } } })
    const parent = host.sessions.get(parentId)!
    parent.append('turn/start', { turn: 9 })
    parent.append('step/start', { turn: 9, step: 0, provider: 'p', model: 'm' })
    parent.append('assistant/message', { turn: 9, text: 'ok' })
    parent.append('step/end', { turn: 9, step: 0, usage: { input: 1000, output: 200 }, finish: 'stop' })
    parent.append('turn/end', { turn: 9, reason: 'completed' })
    const usd = (1000 * 1 + 200 * 4) / 1e6
    const priced = await connect({ prices })
    try {
      const answer = async (name: string, args: Record<string, unknown>) =>
        (await priced.callTool({ name, arguments: args })).structuredContent as Record<string, unknown>
      const listed = sessionListPage.parse(await answer('list_sessions', {}))
      expect(listed.sessions.find((entry) => entry.header.id === parentId)?.cost).toBeCloseTo(usd, 12)
      expect(sessionStatsReport.parse(await answer('session_stats', { id: parentId })).cost?.usd).toBeCloseTo(usd, 12)
      // Each row is priced as the catalog's tree prices it (the HTTP route's pricing).
      const rows = subagentList.parse(await answer('list_agents', { id: parentId })).rows
      const oracle = treeListingCosts(await host.subagents.treeSnapshots(parentId, ['sessionStats'], { descendants: true }), prices)
      expect(rows.map((row) => [row.id, 'cost' in row, row.cost, row.costReason])).toEqual(
        rows.map((row) => {
          const cost = oracle.get(row.id)
          return [row.id, true, cost?.cost, cost !== undefined && cost.cost === null ? cost.costReason : undefined]
        }),
      )
      // The text table shows the same costs, a row whose cost is unknown shows none.
      const table = ((await priced.callTool({ name: 'list_agents', arguments: { id: parentId } })).content as { text: string }[])[0]!.text
      const lines = table.split('\n')
      expect(lines.map((line) => line.match(/ {2}\$(\d+\.\d{6})/)?.[1] ?? null)).toEqual(
        rows.map((row) => (typeof row.cost === 'number' ? row.cost.toFixed(6) : null)),
      )
      expect(rows.map((row) => row.cost)).toEqual([null, expect.closeTo((500 * 1 + 100 * 4) / 1e6, 12)])
      const { tools } = await priced.listTools()
      for (const name of ['list_sessions', 'list_agents', 'session_stats'])
        expect(tools.find((tool) => tool.name === name)?.description).toContain("the server's price table")
      // The server without a table: no row carries a cost, and the descriptions say cost is null.
      expect(subagentList.parse(await call('list_agents', { id: parentId })).rows.map((row) => 'cost' in row)).toEqual([false, false])
      const plain = ((await client.callTool({ name: 'list_agents', arguments: { id: parentId } })).content as { text: string }[])[0]!.text
      expect(plain).not.toMatch(/ {2}\$\d/)
      expect((await client.listTools()).tools.find((tool) => tool.name === 'session_stats')?.description).toContain('cost is null')
    } finally {
      await priced.close()
    }
  })

  it('turns bad input and failures into tool errors carrying our codes, and keeps serving', async () => {
    const bad = await client.callTool({ name: 'show_session', arguments: { id: parentId, limit: 'ten', extra: 1 } })
    expect(bad.isError).toBe(true)
    expect(bad.structuredContent).toMatchObject({ error: { code: 'MCP_INVALID_INPUT' } })
    expect((bad.content as { text: string }[])[0]!.text).toMatch(
      /^MCP_INVALID_INPUT: show_session: invalid arguments \(limit: .*; input: .*extra/,
    )

    const missing = await client.callTool({ name: 'show_session', arguments: { id: 'no-such-session' } })
    expect(missing.isError).toBe(true)
    expect((missing.structuredContent as { error: { code: string } }).error.code).toMatch(/NOT_FOUND/)

    const unknown = await client.callTool({ name: 'subagent', arguments: {} })
    expect(unknown.isError).toBe(true)
    expect(unknown.structuredContent).toMatchObject({ error: { code: 'MCP_UNKNOWN_TOOL' } })
    expect((unknown.content as { text: string }[])[0]!.text).toContain('--allow-control')

    const search = await client.callTool({ name: 'search', arguments: { text: '!!!' } })
    expect(search.structuredContent).toMatchObject({ error: { code: 'MCP_INVALID_INPUT' } })

    // Still serving.
    expect(((await call('list_sessions', {})).sessions as unknown[]).length).toBe(3)
  })

  it('offers control tools only with allowControl, each taking the acting session', async () => {
    const seen: { input: unknown; agent: string }[] = []
    const echo: ControlTool = {
      name: 'report',
      description: 'Send a message to your parent.',
      jsonSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        properties: { text: { type: 'string' } },
        required: ['text'],
        additionalProperties: false,
      },
      async execute(input, { agent }) {
        seen.push({ input, agent: agent.id })
        return { text: 'reported' }
      },
    }
    const listAgents: ControlTool = { ...echo, name: 'list_agents' }
    await client.close()
    client = await connect({ allowControl: true, control: host.subagents, controlTools: () => [echo, listAgents] })
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'compact_session',
      'list_agents',
      'list_sessions',
      'report',
      'search',
      'session_stats',
      'show_session',
    ])
    const report = tools.find((tool) => tool.name === 'report')!
    expect(report.inputSchema).toMatchObject({
      type: 'object',
      required: ['session', 'text'],
      properties: { session: { type: 'string' }, text: { type: 'string' } },
    })

    const live = host.sessions.create()
    const ok = await client.callTool({ name: 'report', arguments: { session: live.id, text: 'hi' } })
    expect(ok.content).toEqual([{ type: 'text', text: 'reported' }])
    expect(seen).toEqual([{ input: { text: 'hi' }, agent: live.id }])

    const cold = await client.callTool({ name: 'report', arguments: { session: 'nobody', text: 'hi' } })
    expect(cold.structuredContent).toMatchObject({ error: { code: 'MCP_AGENT_UNAVAILABLE' } })
    const noSession = await client.callTool({ name: 'report', arguments: { text: 'hi' } })
    expect(noSession.structuredContent).toMatchObject({ error: { code: 'MCP_INVALID_INPUT' } })
  })

  it('offers the harness-dialect control tools, and list_agents in the harness rendering, when asked', async () => {
    await client.close()
    client = await connect({
      allowControl: true,
      control: host.subagents,
      controlTools: (control) => subagentControlTools(control, { dialect: 'harness' }),
      listAgentsFormat: 'harness',
    })
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'compact_session',
      'interrupt_agent',
      'list_agents',
      'list_sessions',
      'report',
      'search',
      'send_message',
      'session_stats',
      'show_session',
      'subagent',
    ])
    expect(tools.find((tool) => tool.name === 'subagent')!.inputSchema).toMatchObject({
      required: ['session', 'description', 'prompt'],
      properties: { session: { type: 'string' }, description: { type: 'string' }, run_in_background: { type: 'boolean' } },
    })
    expect(tools.find((tool) => tool.name === 'list_agents')!.description).toContain('[running|idle|ready]')

    const started = await client.callTool({
      name: 'subagent',
      arguments: { session: parentId, description: 'wombat counter', prompt: 'count' },
    })
    const id = (started.structuredContent as { subagentId: string }).subagentId
    expect(started.content).toEqual([{ type: 'text', text: `started subagent ${id}` }])
    expect(started.structuredContent).toEqual({ text: `started subagent ${id}`, kind: 'continuable', subagentId: id })
    await host.subagents.wait([id], { caller: parentId })
    const fixer = (await host.subagents.listChildren(parentId)).find((row) => row.kind === 'child' && row.label === 'fixer')!.id
    const listed = await client.callTool({ name: 'list_agents', arguments: { id: parentId } })
    expect(listed.content).toEqual([{ type: 'text', text: `${fixer} [ready] — fixer\n${id} [ready] — wombat counter` }])
    // The structured answer stays the wire body of every child, one-shot included.
    expect((listed.structuredContent as { rows: unknown[] }).rows.length).toBe(3)

    const sent = await client.callTool({ name: 'send_message', arguments: { session: parentId, subagent_id: id, message: 'again' } })
    expect(sent.content).toEqual([{ type: 'text', text: `message queued as the next turn for subagent ${id}` }])
    await host.subagents.wait([id], { caller: parentId })
    const stopped = await client.callTool({ name: 'interrupt_agent', arguments: { session: parentId, agent_id: id } })
    expect(stopped.structuredContent).toEqual({ text: `interrupt requested for agent ${id}`, agentId: id, accepted: true, running: false })
    const waited = await client.callTool({
      name: 'subagent',
      arguments: { session: parentId, description: 'quick', prompt: 'sum', run_in_background: false },
    })
    expect(waited.content).toEqual([{ type: 'text', text: 'Done: sum' }])
    const wrongShape = await client.callTool({ name: 'send_message', arguments: { session: parentId, id, message: 'x' } })
    expect(wrongShape.structuredContent).toMatchObject({ error: { code: 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT' } })
  })

  it('names a missing service and an untyped tool failure with their codes', async () => {
    expect(() => createMcpServer(host.ctx, { allowControl: true })).toThrow(expect.objectContaining({ code: 'MCP_SERVICE_UNAVAILABLE' }))

    await client.close()
    const empty = { get: () => undefined }
    const broken: ControlTool = {
      name: 'explode',
      description: 'Fails without a code.',
      jsonSchema: { type: 'object', properties: {} },
      async execute() {
        throw new Error('kaboom')
      },
    }
    const live = host.sessions.create()
    client = await connectClient(empty as never, {
      allowControl: true,
      control: host.subagents,
      controlTools: () => [broken],
      resolveAgent: async () => live,
    })
    const noQuery = await client.callTool({ name: 'list_sessions', arguments: {} })
    expect(noQuery.structuredContent).toMatchObject({ error: { code: 'MCP_SERVICE_UNAVAILABLE' } })
    const exploded = await client.callTool({ name: 'explode', arguments: { session: live.id } })
    expect(exploded).toMatchObject({ isError: true, structuredContent: { error: { code: 'MCP_TOOL_FAILED', message: 'kaboom' } } })
  })
})
