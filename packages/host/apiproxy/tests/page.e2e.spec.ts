import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { subagentList } from '@dsh/protocol'
import { appendUserMessage } from '@dsh/session-persistence'
import { launchChromium, screenshot, seriousViolations } from '@dsh/test-kit/browser'
import type { BrowserContext, Page, Response as PageResponse } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ApiServer, createApiServer } from '../src/index.js'
import { PAGE_SCRIPTS } from '../src/page-routes.js'
import { pngBytes } from './support/png.js'
import { type Stack, startStack, TOKEN, turn } from './support/stack.js'

// The catalog page in a real headless Chromium (Debian's /usr/bin/chromium via
// playwright-core) against the real stack over HTTP, on disk: the sessions
// list, a session's transcript, its trace, live updates and a server restart.

const outputDir = fileURLToPath(new URL('../test-output/', import.meta.url))
let stack: Stack
let userDataDir: string
let browser: BrowserContext
let page: Page
let restarted: ApiServer | undefined
/** A first prompt, and so a title, that would run script if the page rendered it as markup. */
const HOSTILE_TITLE = '<img src=x onerror="globalThis.dshPwned=1"><b>bold</b>'
/** A subagent id and label that would run script as markup. */
const HOSTILE_ID = '<img src=x onerror=globalThis.dshPwned=2>'
const HOSTILE_LABEL = '<script>globalThis.dshPwned=3</script>'
const requests: string[] = []
const consoleErrors: string[] = []

beforeAll(async () => {
  // What `dsh serve` embeds: zstd JSONL files, the SQLite query index and projection cache.
  stack = await startStack({ backend: 'disk' })
  const { sessions, subagents, gates } = stack
  const parent = sessions.create({ id: 'parent', cwd: '/work/project' })
  turn(parent, 'plan the work')
  turn(sessions.create({ id: 'other' }), 'unrelated')
  turn(sessions.create({ id: 'brackets' }), 'quokka items[0] and [mark] here')
  turn(sessions.create({ id: 'hostile-title' }), HOSTILE_TITLE)
  await subagents.spawn(parent, { mode: 'one-shot', label: 'summarizer', context: 'fresh', prompt: 'summarize', id: 'fresh-one-shot' }).done
  await subagents.spawn(parent, { mode: 'one-shot', label: HOSTILE_LABEL, context: 'fresh', prompt: HOSTILE_TITLE, id: HOSTILE_ID }).done
  gates.hold('forked-continuable')
  const continuable = subagents.spawn(parent, {
    mode: 'continuable',
    label: 'researcher',
    context: 'fork',
    prompt: 'research',
    id: 'forked-continuable',
  })
  await subagents.spawn(continuable.session, { mode: 'one-shot', context: 'fresh', prompt: 'dig', id: 'grandchild' }).done
  // Settled debris: a subagent session without any descriptor lists as a corrupt diagnostic.
  const broken = sessions.create({ id: 'broken-child', parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
  turn(broken, 'lost my descriptor')
  await sessions.dispose('broken-child')
  await richSession()

  userDataDir = mkdtempSync(join(tmpdir(), 'dsh-chromium-'))
  browser = await launchChromium(userDataDir)
  page = browser.pages()[0] ?? (await browser.newPage())
  page.on('request', (request) => requests.push(request.url()))
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text())
  })
})

afterAll(async () => {
  stack?.gates.release('forked-continuable')
  await browser?.close()
  await restarted?.close()
  await stack?.close()
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true })
})

/** A session with every kind of transcript item: an image, reasoning, a tool call and a failed result, a compaction, usage. */
async function richSession(): Promise<void> {
  const rich = stack.sessions.create({ id: 'rich' })
  rich.append('turn/start', { turn: 1 })
  await appendUserMessage(stack.persistence, rich, 'look at this picture', [
    { bytes: pngBytes(24, 16, [200, 30, 30]), mediaType: 'image/png', name: 'red.png' },
  ])
  rich.append('step/start', { model: 'model-x', provider: 'fake' })
  rich.append('assistant/message', {
    turn: 1,
    text: 'It is red.',
    usage: { input: 120, output: 30 },
    model: 'model-x',
    blocks: [
      { type: 'reasoning', text: 'The pixels are all red.' },
      { type: 'text', text: 'It is red.' },
      { type: 'tool-call', id: 'call-1', name: 'read_file', input: { path: '/etc/<passwd>' } },
    ],
  })
  rich.append('tool/call', { turn: 1, callId: 'call-1', name: 'read_file', arguments: { path: '/etc/<passwd>' } })
  rich.append('step/end', { usage: { input: 120, output: 30 }, finish: 'tool-calls' })
  rich.append('tool/result', { turn: 1, callId: 'call-1', content: 'EACCES: <b>permission denied</b>', isError: true })
  rich.append('compaction/start', { compactionId: 'c1', reason: 'budget' })
  rich.append('compaction/summary', {
    compactionId: 'c1',
    from: 1,
    to: 5,
    summary: [{ type: 'text', text: 'The user showed a red picture.' }],
  })
  rich.append('compaction/end', { compactionId: 'c1' })
  rich.append('turn/end', { turn: 1, reason: 'error' })
  await stack.sessions.flush(rich)
}

const span = (id: string) => page.locator(`#trace li[data-span-id="${id}"]`)
const pwned = () => page.evaluate(() => (globalThis as unknown as { dshPwned?: number }).dshPwned)
const marker = (value?: number) =>
  page.evaluate((v) => {
    const g = globalThis as unknown as { dshMarker?: number }
    if (v !== undefined) g.dshMarker = v
    return g.dshMarker
  }, value)

describe('catalog page', () => {
  it('lists sessions with title, state, tokens, cost and subagents; filters; searches with highlighted matches', async () => {
    await page.goto(stack.server.pageUrl)
    const row = (id: string) => page.locator(`#sessions tr[data-session-id="${id}"]`)
    await row('parent').waitFor()
    // Top-level sessions only by default.
    expect(await row('fresh-one-shot').count()).toBe(0)
    expect(await row('parent').locator('td.title a').textContent()).toBe('plan the work')
    expect(await row('parent').getAttribute('data-state')).toBe('live')
    expect(await row('rich').locator('td.tokens').textContent()).toBe('150')
    expect(await row('rich').locator('td.cost').textContent()).toBe('—')
    await row('parent').locator('td.children[data-children="4"]').waitFor()
    await row('other').locator('td.children[data-children="0"]').waitFor()
    // Markup in a title is shown as text, never run.
    const hostile = row('hostile-title').locator('td.title a')
    expect(await hostile.textContent()).toBe(HOSTILE_TITLE)
    expect(await hostile.locator('img, b').count()).toBe(0)
    await screenshot(page, outputDir, 'list')
    expect(await seriousViolations(page)).toEqual([])

    // Subagents, then those at rest only (the disposed corrupt child, not the running one).
    await page.selectOption('#filter-kind', 'subagent')
    await row('fresh-one-shot').waitFor()
    expect(await row(HOSTILE_ID).locator('.sub').textContent()).toBe(HOSTILE_ID)
    await page.selectOption('#filter-state', 'at-rest')
    await row('broken-child').waitFor()
    expect(await row('forked-continuable').count()).toBe(0)
    await page.selectOption('#filter-state', 'all')
    await page.selectOption('#filter-kind', 'top')
    await row('parent').waitFor()

    // Full-text search: matched words marked, hostile text shown as text.
    await page.fill('#search', 'summarize')
    await page.press('#search', 'Enter')
    const hit = page.locator('#search-hits li[data-hit-session="fresh-one-shot"]').first()
    await hit.waitFor()
    expect(await hit.locator('mark').first().textContent()).toMatch(/^summarize$/i)
    expect(await hit.locator('a').getAttribute('href')).toContain('parent=parent')
    await page.fill('#search', 'onerror dshPwned')
    await page.press('#search', 'Enter')
    await page.locator('#search-hits li mark').first().waitFor()
    expect(await page.locator('#search-hits img, #search-hits b, #search-hits script').count()).toBe(0)
    // Brackets in the text are text: only the matched word is marked.
    await page.fill('#search', 'quokka')
    await page.press('#search', 'Enter')
    const bracketed = page.locator('#search-hits li[data-hit-session="brackets"] .snippet').first()
    await bracketed.waitFor()
    expect(await bracketed.locator('mark').allTextContents()).toEqual(['quokka'])
    expect(await bracketed.textContent()).toContain('items[0] and [mark] here')
    await screenshot(page, outputDir, 'search')
    expect(await seriousViolations(page)).toEqual([])
    expect(await pwned()).toBeUndefined()
  })

  it("shows a transcript: messages, collapsed reasoning and tools, a highlighted error, a compaction's range, an image, deep links", async () => {
    await page.goto(`${stack.server.pageUrl}#session=rich`)
    const item = (type: string) => page.locator(`#transcript li[data-type="${type}"]`)
    await item('user/message').waitFor()
    expect(await item('user/message').locator('.text').textContent()).toBe('look at this picture')
    const reasoning = item('assistant/message').locator('details.reasoning')
    expect(await reasoning.evaluate((node) => (node as unknown as { open: boolean }).open)).toBe(false)
    expect(await item('assistant/message').locator('details.tool-call code').textContent()).toBe('read_file')
    // The `tool/call` event mirrors the message's block: shown once.
    expect(await item('tool/call').count()).toBe(0)
    const failed = item('tool/result')
    expect(await failed.getAttribute('class')).toContain('error')
    expect(await failed.locator('details').evaluate((node) => (node as unknown as { open: boolean }).open)).toBe(true)
    expect(await failed.locator('pre').textContent()).toBe('EACCES: <b>permission denied</b>')
    expect(await item('turn/end').getAttribute('class')).toContain('error')
    const range = item('compaction/summary').locator('a', { hasText: 'events 1–4' })
    expect(await range.getAttribute('href')).toBe('#session=rich&event=1')
    // The image comes through the authorized attachment route and decodes.
    const image = item('user/message').locator('img.attachment')
    await expect
      .poll(() => image.evaluate((node) => (node as unknown as { naturalWidth: number }).naturalWidth), { timeout: 120_000 })
      .toBe(24)
    expect(await image.getAttribute('src')).toMatch(/^\/api\/sessions\/rich\/attachments\/[0-9a-f]{64}\?token=/)
    expect(await page.locator('#session-title').textContent()).toBe('look at this picture')
    await screenshot(page, outputDir, 'transcript')
    expect(await seriousViolations(page)).toEqual([])

    // A deep link to an event focuses it; following the compaction's range link goes to its first event.
    await range.click()
    await page.locator('#ev-1.target').waitFor()
    expect(await page.evaluate('document.activeElement?.id')).toBe('ev-1')
    await page.goto(`${stack.server.pageUrl}#session=rich&event=6`)
    await page.locator('#ev-6.target').waitFor()
  })

  it('shows the trace: nested spans, a waterfall, tokens and rollups, why a row is unavailable; a running child settles live', async () => {
    await page.goto(`${stack.server.pageUrl}#session=parent&view=trace`)
    await span('grandchild').waitFor()
    await page.locator('#status[data-state="open"]').waitFor()
    expect(await span('forked-continuable').locator('li[data-span-id="grandchild"]').count()).toBe(1)
    expect(await span('forked-continuable').getAttribute('data-activity')).toBe('running')
    expect(await span('fresh-one-shot').getAttribute('data-activity')).toBe('inactive')
    expect(await span('fresh-one-shot').locator('.span-name').first().textContent()).toBe('summarizer')
    expect(await span(HOSTILE_ID).locator('.span-name').first().textContent()).toBe(HOSTILE_LABEL)
    expect(await span('broken-child').getAttribute('data-reason')).toBe('corrupt')
    expect(await span('broken-child').locator('.why').textContent()).toContain('descriptor')
    // A settled child's bar runs over the wall-clock span its catalog row reports (the timing unit's).
    const listed = (await stack.get('/api/sessions/parent/subagents?scope=descendants')).body as {
      rows: Array<{ id: string; startedAt?: number | null; endedAt?: number | null }>
    }
    const settled = listed.rows.find((row) => row.id === 'fresh-one-shot')
    expect(settled?.startedAt).toEqual(expect.any(Number))
    expect(settled?.endedAt).toBeGreaterThanOrEqual(settled?.startedAt ?? Infinity)
    expect(await span('fresh-one-shot').getAttribute('data-start')).toBe(String(settled?.startedAt))
    expect(await span('fresh-one-shot').getAttribute('data-end')).toBe(String(settled?.endedAt))
    // Every span with a known start has a bar; the root's rollup counts its tree.
    expect(await page.locator('#trace .bar:not(.unknown)').count()).toBeGreaterThanOrEqual(5)
    const rollup = Number(await span('parent').locator(':scope > .span .span-rollup').getAttribute('data-tokens'))
    const own = await page
      .locator('#trace .span-tokens')
      .evaluateAll((nodes) => nodes.map((n) => Number(n.getAttribute('data-tokens') || 0)))
    expect(rollup).toBe(own.reduce((a, b) => a + b, 0))
    await screenshot(page, outputDir, 'trace')
    expect(await seriousViolations(page)).toEqual([])

    await marker(42)
    stack.gates.release('forked-continuable')
    await page.locator('#trace li[data-span-id="forked-continuable"][data-activity="inactive"]').waitFor({ timeout: 120_000 })
    // A child spawned while the page is open appears without a reload.
    await stack.subagents.spawn('parent', { mode: 'one-shot', label: 'late arrival', context: 'fresh', prompt: 'late', id: 'late-child' })
      .done
    await page.locator('#trace li[data-span-id="late-child"][data-activity="inactive"]').waitFor({ timeout: 120_000 })
    expect(await marker()).toBe(42)

    // A child's transcript opens through its parent's catalog.
    await span('fresh-one-shot').locator('.span-name').first().click()
    await page.locator('#transcript li', { hasText: 'finished summarize' }).first().waitFor()
    expect(page.url()).toContain('parent=parent')
    expect(await pwned()).toBeUndefined()
  })

  it("shows a subagent's heading and trace through its parent's catalog, with no request refused", async () => {
    // A running child (held mid-turn) with a child of its own, and a model call with usage in its open turn.
    stack.gates.hold('traced')
    const run = stack.subagents.spawn('parent', { mode: 'one-shot', label: 'tracer', context: 'fresh', prompt: 'trace me', id: 'traced' })
    await stack.subagents.spawn(run.session, { mode: 'one-shot', context: 'fresh', prompt: 'dig below', id: 'traced-grandchild' }).done
    const open = run.session.events.findLast((event) => event.type === 'turn/start')?.data as { turn: number }
    run.session.append('assistant/message', {
      turn: open.turn,
      text: 'counted',
      usage: { input: 50, output: 7 },
      provider: 'p',
      model: 'm',
    })
    const refused: string[] = []
    const onResponse = (response: PageResponse) => {
      if (response.status() >= 400) refused.push(`${response.status()} ${response.url()}`)
    }
    page.on('response', onResponse)
    const first = requests.length
    try {
      await page.goto(`${stack.server.pageUrl}#session=traced&parent=parent&view=trace`)
      const root = page.locator('#trace > li[data-span-id="traced"]')
      await root.locator('li[data-span-id="traced-grandchild"]').waitFor()
      await page.locator('#session-title', { hasText: 'tracer' }).waitFor()
      await page.locator('#meta-state[data-state="live"]').waitFor()
      // The root's own tokens are its row in its parent's catalog; the rollup adds its subtree's rows.
      const rows = subagentList.parse((await stack.get('/api/sessions/parent/subagents?scope=descendants')).body).rows
      const tokensOf = (id: string) => rows.find((row) => row.id === id)?.tokens ?? Number.NaN
      expect(tokensOf('traced')).toBeGreaterThanOrEqual(57)
      expect(await root.locator(':scope > .span .span-tokens').getAttribute('data-tokens')).toBe(String(tokensOf('traced')))
      expect(Number(await root.locator(':scope > .span .span-rollup').getAttribute('data-tokens'))).toBe(
        tokensOf('traced') + tokensOf('traced-grandchild'),
      )
      expect(await page.locator('#meta-tokens').textContent()).not.toBe('—')
      expect(await page.locator('#trace-summary').textContent()).toMatch(/^2 sessions, /)
      expect(await page.locator('#trace-error').isHidden()).toBe(true)

      // A grandchild's transcript and heading, through its own parent.
      await page.goto(`${stack.server.pageUrl}#session=traced-grandchild&parent=traced`)
      await page.locator('#transcript li', { hasText: 'finished dig below' }).first().waitFor()
      // The heading was reset to '…' for the new session: it shows a state again once its facts are read.
      await expect.poll(() => page.locator('#meta-state').textContent(), { timeout: 120_000 }).not.toBe('…')
      expect(await page.locator('#meta-state').textContent()).not.toContain('unknown')
      expect(await page.locator('#meta-tokens').textContent()).not.toBe('…')
    } finally {
      page.off('response', onResponse)
      stack.gates.release('traced')
      await run.done
    }
    expect(refused).toEqual([])
    expect(requests.slice(first).filter((url) => /\/api\/sessions\/traced(-grandchild)?\/stats/.test(url))).toEqual([])
  })

  it('streams new events into an open transcript, and reconnects by itself after a server restart', async () => {
    const live = stack.sessions.create({ id: 'live-one' })
    turn(live, 'first question')
    await page.goto(`${stack.server.pageUrl}#session=live-one`)
    await page.locator('#transcript li', { hasText: 'first question' }).first().waitFor()
    await page.locator('#status[data-state="open"]').waitFor()
    await marker(7)
    turn(live, 'second question')
    await page.locator('#transcript li', { hasText: 'answer to second question' }).waitFor({ timeout: 120_000 })

    // The server goes away and comes back on the same port: the page notices both, without a reload.
    const port = stack.server.port
    await stack.server.close()
    await page.locator('#status[data-state="error"]').waitFor({ timeout: 120_000 })
    restarted = await createApiServer({ ctx: stack.ctx, token: TOKEN, port })
    await page.locator('#status[data-state="open"]').waitFor({ timeout: 120_000 })
    turn(live, 'third question')
    await page.locator('#transcript li', { hasText: 'answer to third question' }).waitFor({ timeout: 120_000 })
    expect(await marker()).toBe(7)
  })

  it('stays small and self-contained: JS and CSS at most 100 KiB gzipped, the strict CSP, no request off the origin', async () => {
    const base = restarted?.url ?? stack.server.url
    let gzipped = 0
    for (const file of [...PAGE_SCRIPTS, 'app.css']) {
      const response = await fetch(`${base}/${file}`)
      expect(response.status).toBe(200)
      gzipped += gzipSync(Buffer.from(await response.arrayBuffer()), { level: 9 }).length
    }
    console.log(`page assets: ${gzipped} bytes gzipped`)
    expect(gzipped).toBeLessThanOrEqual(100 * 1024)
    const html = await fetch(`${base}/?token=${TOKEN}`)
    expect(html.headers.get('content-security-policy')).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    )
    // Every asset the page loaded is one of those measured, and nothing left the origin.
    const assets = requests.filter((url) => /\.(js|css)$/.test(new URL(url).pathname)).map((url) => new URL(url).pathname.slice(1))
    expect(new Set(assets)).toEqual(new Set([...PAGE_SCRIPTS, 'app.css']))
    const origins = new Set(requests.map((url) => new URL(url).origin))
    expect([...origins].every((origin) => origin.startsWith('http://127.0.0.1:'))).toBe(true)
    expect(consoleErrors.filter((text) => !/Failed to load resource|EventSource|ERR_CONNECTION_REFUSED/.test(text))).toEqual([])
  })

  it('shows a typed error instead of data when the token is wrong', async () => {
    const response = await page.goto(`${restarted?.url ?? stack.server.url}/?token=wrong-token-0123456789`)
    expect(response?.status()).toBe(401)
    expect(await page.locator('body').textContent()).toContain('API_UNAUTHORIZED')
  })
})
