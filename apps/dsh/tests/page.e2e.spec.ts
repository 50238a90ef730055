import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { answer, callTools, type ModelServer, startModelServer } from '@dsh/driver-openai/testing'
import { type ApiServer, createHost, type Host } from '@dsh/host'
import { SessionId } from '@dsh/session'
import { readPriceTable } from '@dsh/session-stats'
import { createScriptedDriver } from '@dsh/subagent'
import { launchChromium, screenshot, seriousViolations } from '@dsh/test-kit/browser'
import type { BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// The web catalog over roots the built CLI wrote (`dsh demo`, and `dsh run`
// delegating to a subagent through a local Chat Completions server), served
// the way `dsh serve` serves it (createHost's http plugin), in Debian's headless Chromium.

const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const outputDir = join(import.meta.dirname, '..', 'test-output')
const TOKEN = 'page-test-token-0123456789'
let dir: string
let demo: Host
let delegation: Host
let runId: string
let models: ModelServer
let browser: BrowserContext
let page: Page
let release!: () => void
const hold = new Promise<void>((resolve) => (release = resolve))

function env(): NodeJS.ProcessEnv {
  const { DSH_API_KEY: _a, OPENAI_API_KEY: _b, DSH_BASE_URL: _c, OPENAI_BASE_URL: _d, DSH_MODEL: _e, ...rest } = process.env
  return { ...rest, DSH_API_KEY: 'sk-page-0d9c7b5a3f1e' }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-page-'))
  await promisify(execFile)(process.execPath, [bin, 'demo', '--json', '--root', join(dir, 'demo')])
  models = await startModelServer((request) => {
    const lastUser = request.body.messages.filter((m) => m.role === 'user').at(-1)?.content
    if (lastUser === 'count the wombats in the garden') return answer(['There are ', '7 wombats.'], { prompt: 12, completion: 5 })
    const step = request.body.messages.filter((m) => m.role === 'tool').length
    if (step === 0)
      return callTools(
        [{ id: 'c1', name: 'subagent', arguments: '{"prompt":"count the wombats in the garden","label":"counter","mode":"one-shot"}' }],
        { prompt: 30, completion: 9 },
      )
    return answer(['The counter ', 'found 7.'], { prompt: 50, completion: 4 })
  })
  const run = await promisify(execFile)(
    process.execPath,
    [bin, 'run', 'How many wombats?', '--root', join(dir, 'run'), '--base-url', models.baseURL, '--model', 'wombat-1'],
    { env: env() },
  )
  runId = /^session (\S+)$/m.exec(run.stdout)?.[1] ?? ''
  expect(runId).not.toBe('')
  demo = await createHost({
    root: join(dir, 'demo'),
    driver: createScriptedDriver([
      { kind: 'message', text: 'on it' },
      { kind: 'until', promise: hold },
    ]),
    http: { token: TOKEN },
  })
  // The run's own calls used 80 prompt and 13 completion tokens: 80 × $1000 + 13 × $10000 per million is $0.21.
  const prices = join(dir, 'prices.json')
  writeFileSync(prices, JSON.stringify({ currency: 'USD', providers: { '127.0.0.1': { 'wombat-1': { input: 1000, output: 10000 } } } }))
  delegation = await createHost({ root: join(dir, 'run'), http: { token: TOKEN }, prices: await readPriceTable(prices) })
  browser = await launchChromium(join(dir, 'chromium-profile'))
  page = browser.pages()[0] ?? (await browser.newPage())
})

afterAll(async () => {
  release()
  await browser?.close()
  await demo?.dispose()
  await delegation?.dispose()
  await models?.close()
  rmSync(dir, { recursive: true, force: true })
})

const server = (host: Host): ApiServer => host.http as ApiServer
const span = (id: string) => page.locator(`#trace li[data-span-id="${id}"]`)

describe('the demo root', () => {
  it('lists the demo sessions with titles and subagent counts', async () => {
    await page.goto(server(demo).pageUrl)
    const row = page.locator('#sessions tr[data-session-id="release-1.4"]')
    await row.waitFor()
    expect((await row.locator('td.title a').textContent())?.length).toBeGreaterThan(0)
    await row.locator('td.children:not([data-children="pending"])').waitFor()
    expect(Number(await row.locator('td.children').getAttribute('data-children'))).toBeGreaterThanOrEqual(4)
    await screenshot(page, outputDir, 'demo-list')
    expect(await seriousViolations(page)).toEqual([])
  })

  it("shows the parent's transcript and a child's through the parent", async () => {
    await page.goto(`${server(demo).pageUrl}#session=release-1.4`)
    await page.locator('#transcript li[data-type="user/message"]').first().waitFor()
    await screenshot(page, outputDir, 'demo-transcript')
    expect(await seriousViolations(page)).toEqual([])
    await page.goto(`${server(demo).pageUrl}#session=release-1.4.researcher&parent=release-1.4`)
    await page.locator('#transcript li[data-type="assistant/message"]').first().waitFor()
  })

  it('shows the trace: nested children, the unreadable one says why; a child spawned in the serving process runs and settles live', async () => {
    await page.goto(`${server(demo).pageUrl}#session=release-1.4&view=trace`)
    await span('release-1.4.planner.fact-checker').waitFor()
    expect(await span('release-1.4.planner').locator('li[data-span-id="release-1.4.planner.fact-checker"]').count()).toBe(1)
    expect(await span('release-1.4.researcher').getAttribute('data-kind')).toBe('child')
    const broken = span('release-1.4.log-summarizer')
    expect(await broken.getAttribute('data-kind')).toBe('diagnostic')
    expect((await broken.locator('.why').textContent())?.length).toBeGreaterThan(10)
    await page.locator('#status[data-state="open"]').waitFor()
    await screenshot(page, outputDir, 'demo-trace')
    expect(await seriousViolations(page)).toEqual([])

    // Resume the parent and spawn a child that holds its turn open.
    const parent = demo.sessions.restore(await demo.persistence.load(SessionId('release-1.4')))
    const child = demo.subagents.spawn(parent, {
      id: 'release-1.4.hotfix',
      mode: 'one-shot',
      label: 'hotfix',
      context: 'fresh',
      prompt: 'patch it',
    })
    await page.locator('#trace li[data-span-id="release-1.4.hotfix"][data-activity="running"]').waitFor({ timeout: 120_000 })
    await page.evaluate(() => ((globalThis as unknown as { dshMarker: number }).dshMarker = 7))
    release()
    await child.done
    await page.locator('#trace li[data-span-id="release-1.4.hotfix"][data-activity="inactive"]').waitFor({ timeout: 120_000 })
    // Same document: a reload would have wiped the marker.
    expect(await page.evaluate(() => (globalThis as unknown as { dshMarker?: number }).dshMarker)).toBe(7)
  })
})

describe('a `dsh run` delegation', () => {
  it("lists the run's cost priced by the server's table", async () => {
    await page.goto(server(delegation).pageUrl)
    const cost = page.locator(`#sessions tr[data-session-id="${runId}"] td.cost`)
    await cost.waitFor()
    expect(await cost.textContent()).toBe('$0.21')
  })

  it("shows each trace span's own cost and the tree's, priced by the server's table", async () => {
    await page.goto(`${server(delegation).pageUrl}#session=${encodeURIComponent(runId)}&view=trace`)
    const childSpan = page.locator('#trace li[data-kind="child"] > .span')
    await childSpan.waitFor()
    const rootSpan = page.locator(`#trace li[data-span-id="${runId}"] > .span`)
    // The root's own cost is the listing's; the child's is a figure of its own.
    expect(await rootSpan.locator('.span-cost').textContent()).toBe('$0.21')
    expect(await childSpan.locator('.span-cost').textContent()).toMatch(/^\$\d+\.\d+$/)
    const own = Number(await rootSpan.locator('.span-cost').getAttribute('data-cost'))
    const child = Number(await childSpan.locator('.span-cost').getAttribute('data-cost'))
    expect(child).toBeGreaterThan(0)
    // Every cost is known, so the tree's is their sum, not a lower bound.
    const tree = rootSpan.locator('.span-cost-rollup')
    expect(await tree.getAttribute('data-partial')).toBe('false')
    expect(Number(await tree.getAttribute('data-cost'))).toBeCloseTo(own + child, 12)
    expect(await tree.textContent()).not.toContain('≥')
  })

  it("shows the run's tree with the child's label and tokens, and both transcripts", async () => {
    await page.goto(`${server(delegation).pageUrl}#session=${encodeURIComponent(runId)}&view=trace`)
    const childSpan = page.locator('#trace li[data-kind="child"]')
    await childSpan.waitFor()
    expect(await childSpan.locator('.span-name').textContent()).toBe('counter')
    expect(await childSpan.getAttribute('data-activity')).toBe('inactive')
    expect(Number(await childSpan.locator('.span-tokens').getAttribute('data-tokens'))).toBeGreaterThan(0)
    const rootSpan = page.locator(`#trace li[data-span-id="${runId}"]`)
    expect(Number(await rootSpan.locator(':scope > .span .span-rollup').getAttribute('data-tokens'))).toBeGreaterThan(
      Number(await childSpan.locator('.span-tokens').getAttribute('data-tokens')),
    )
    await screenshot(page, outputDir, 'run-trace')
    expect(await seriousViolations(page)).toEqual([])

    // The parent's transcript: the subagent call collapsed with its arguments, the answer.
    await page.goto(`${server(delegation).pageUrl}#session=${encodeURIComponent(runId)}`)
    await page.locator('#transcript li[data-type="assistant/message"]', { hasText: 'The counter found 7.' }).waitFor()
    expect(await page.locator('#transcript details.tool-call code', { hasText: 'subagent' }).count()).toBeGreaterThanOrEqual(1)
    await screenshot(page, outputDir, 'run-transcript')
    expect(await seriousViolations(page)).toEqual([])

    // The child's, through the link in the trace.
    await page.goto(`${server(delegation).pageUrl}#session=${encodeURIComponent(runId)}&view=trace`)
    await page.locator('#trace li[data-kind="child"] .span-name').click()
    await page.locator('#transcript li[data-type="assistant/message"]', { hasText: 'There are 7 wombats.' }).waitFor()
    await page.locator('#transcript li[data-type="user/message"]', { hasText: 'count the wombats in the garden' }).waitFor()
  })
})

describe('a `dsh run` in another process on the served root', () => {
  it('shows its child start, run and end, the session being written then at rest, and its new events, without a reload', async () => {
    const root = join(dir, 'shared')
    const shared = await startModelServer((request) => {
      const lastUser = request.body.messages.filter((m) => m.role === 'user').at(-1)?.content
      if (lastUser === 'first') return answer(['Ready.'])
      // The child streams a piece and holds its answer open: it runs until the run is interrupted.
      if (lastUser === 'dig slowly') return { kind: 'stream', content: ['digging '], hangAfter: 1 }
      if (lastUser === 'delegate now')
        return callTools([{ id: 'd1', name: 'subagent', arguments: '{"prompt":"dig slowly","label":"digger","mode":"one-shot"}' }])
      return undefined
    })
    const first = await promisify(execFile)(
      process.execPath,
      [bin, 'run', 'first', '--root', root, '--base-url', shared.baseURL, '--model', 'wombat-1'],
      { env: env() },
    )
    const parentId = /^session (\S+)$/m.exec(first.stdout)?.[1] ?? ''
    const served = await createHost({ root, http: { token: TOKEN } })
    const transcript = await browser.newPage()
    try {
      await page.goto(`${server(served).pageUrl}#session=${encodeURIComponent(parentId)}&view=trace`)
      await page.locator('#status[data-state="open"]').waitFor()
      await page.locator('#meta-state[data-state="at-rest"]').waitFor()
      await page.locator(`#trace li[data-span-id="${parentId}"]`).waitFor()
      await transcript.goto(`${server(served).pageUrl}#session=${encodeURIComponent(parentId)}`)
      await transcript.locator('#transcript li[data-type="assistant/message"]', { hasText: 'Ready.' }).waitFor()
      await transcript.locator('#status[data-state="open"]').waitFor()
      await page.evaluate(() => ((globalThis as unknown as { dshMarker: number }).dshMarker = 11))

      const run = spawn(
        process.execPath,
        [bin, 'run', 'delegate now', '--resume', parentId, '--root', root, '--base-url', shared.baseURL, '--model', 'wombat-1'],
        { env: env(), stdio: ['ignore', 'pipe', 'pipe'] },
      )
      const exited = new Promise<number | null>((resolve) => run.on('exit', (code) => resolve(code)))
      try {
        // Written by the other process: the parent is being written, its child appears held by that writer.
        const child = page.locator('#trace li[data-kind="child"]')
        await page.locator('#trace li[data-kind="child"][data-writer="other-process"]').waitFor({ timeout: 120_000 })
        expect(await child.locator('.span-name').first().textContent()).toBe('digger')
        await page.locator('#meta-state[data-state="being-written"]').waitFor({ timeout: 120_000 })
        await screenshot(page, outputDir, 'cross-process-trace')
        // The open transcript shows the new events.
        await transcript.locator('#transcript li[data-type="user/message"]', { hasText: 'delegate now' }).waitFor({ timeout: 120_000 })
        await transcript.locator('#transcript details.tool-call code', { hasText: 'subagent' }).waitFor({ timeout: 120_000 })
        await shared.hung()
      } finally {
        // Ctrl-C: the run ends its turn, its child's turn closes, and its writer locks go away.
        run.kill('SIGINT')
      }
      expect(await exited).toBe(130)
      await page.locator('#trace li[data-kind="child"][data-writer="none"][data-activity="inactive"]').waitFor({ timeout: 120_000 })
      await page.locator('#meta-state[data-state="at-rest"]').waitFor({ timeout: 120_000 })
      await transcript.locator('#transcript li[data-type="turn/end"].error').last().waitFor({ timeout: 120_000 })
      expect(await page.evaluate(() => (globalThis as unknown as { dshMarker?: number }).dshMarker)).toBe(11)
      await screenshot(page, outputDir, 'cross-process-at-rest')
    } finally {
      await transcript.close()
      await served.dispose()
      await shared.close()
    }
  })
})
