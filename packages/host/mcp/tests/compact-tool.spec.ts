import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Summarizer } from '@dsh/compaction'
import { createHost, type Host } from '@dsh/host'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, describe, expect, it } from 'vitest'
import { connectClient } from './support.js'

// A summarizer that counts what it is given (the model-backed one is a driver's).
const counting: Summarizer = {
  async summarize({ context }) {
    return { summary: `${context.messages.length} earlier messages.` }
  },
}

let root: string | undefined
let host: Host | undefined
let client: Client | undefined
afterEach(async () => {
  await client?.close()
  await host?.dispose()
  if (root !== undefined) rmSync(root, { recursive: true, force: true })
})

async function connect(h: Host): Promise<Client> {
  const next = await connectClient(h.ctx, { allowControl: true, control: h.subagents, controlTools: () => [] })
  return next
}

describe('compact_session', () => {
  it('compacts through the host’s compaction service; a host without one answers a typed error', async () => {
    root = mkdtempSync(join(tmpdir(), 'dsh-mcp-compact-'))
    host = await createHost({ root, summarizer: counting })
    const session = host.sessions.create()
    for (let turn = 1; turn <= 3; turn++) {
      session.append('turn/start', { turn })
      session.append('user/message', { text: `question ${turn}` })
      session.append('assistant/message', { turn, text: `answer ${turn}` })
      session.append('turn/end', { turn, reason: 'completed' })
    }
    client = await connect(host)
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('compact_session')
    const answer = await client.callTool({ name: 'compact_session', arguments: { session: session.id, keep: 2 } })
    expect(answer.isError ?? false, JSON.stringify(answer.content)).toBe(false)
    expect(answer.structuredContent).toMatchObject({ shadowed: 4 })
    const context = await host.ctx.require('sessionContext').contextOf(session)
    expect(context.messages.map((m) => m.blocks)).toEqual([
      [{ type: 'text', text: '4 earlier messages.' }],
      [{ type: 'text', text: 'question 3' }],
      [{ type: 'text', text: 'answer 3' }],
    ])
    const bad = await client.callTool({ name: 'compact_session', arguments: { session: session.id, keep: -1 } })
    expect(bad).toMatchObject({ isError: true, structuredContent: { error: { code: 'MCP_INVALID_INPUT' } } })
    await client.close()
    await host.dispose()

    host = await createHost({ root })
    client = await connect(host)
    const refused = await client.callTool({ name: 'compact_session', arguments: { session: session.id } })
    expect(refused).toMatchObject({ isError: true, structuredContent: { error: { code: 'MCP_SERVICE_UNAVAILABLE' } } })
  })
})
