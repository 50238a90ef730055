import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type BrowserContext, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Stack, startStack, turn } from './support/stack.js'

// The catalog page in a real headless Chromium (Debian's /usr/bin/chromium via
// playwright-core) against the real stack over HTTP, on disk.

const outputDir = fileURLToPath(new URL('../test-output/', import.meta.url))
let stack: Stack
let userDataDir: string
let browser: BrowserContext
let page: Page
/** A first prompt, and so a title, that would run script if the page rendered it as markup. */
const HOSTILE_TITLE = '<img src=x onerror="globalThis.dshPwned=1"><b>bold</b>'

beforeAll(async () => {
  // What `dsh serve` embeds: zstd JSONL files, the SQLite query index and projection cache.
  stack = await startStack({ backend: 'disk' })
  const { sessions, subagents, gates } = stack
  const parent = sessions.create({ id: 'parent', cwd: '/work/project' })
  turn(parent, 'plan the work')
  turn(sessions.create({ id: 'other' }), 'unrelated')
  turn(sessions.create({ id: 'hostile-title' }), HOSTILE_TITLE)
  await subagents.spawn(parent, { mode: 'one-shot', label: 'summarizer', context: 'fresh', prompt: 'summarize', id: 'fresh-one-shot' }).done
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

  userDataDir = mkdtempSync(join(tmpdir(), 'dsh-chromium-'))
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
    viewport: { width: 1280, height: 800 },
  })
  page = browser.pages()[0] ?? (await browser.newPage())
}, 60_000)

afterAll(async () => {
  stack?.gates.release('forked-continuable')
  await browser?.close()
  await stack?.close()
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true })
})

const row = (id: string) => page.locator(`li[data-row-id="${id}"]`)

describe('catalog page', () => {
  it("shows a parent's subagent tree and updates a row live when a child finishes", async () => {
    const failedRequests: string[] = []
    page.on('requestfailed', (request) => failedRequests.push(request.url()))
    const consoleErrors: string[] = []
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text())
    })

    await page.goto(`${stack.server.pageUrl}#session=parent`)
    await page.locator('#status[data-state="open"]').waitFor()
    await row('grandchild').waitFor()

    // The session list shows top-level sessions (subagents hidden by default).
    await page.locator('#sessions tr[data-session-id="parent"]').waitFor()
    expect(await page.locator('#sessions tr[data-session-id="fresh-one-shot"]').count()).toBe(0)
    // Each session's title (its first prompt), as text: markup in it is shown, never run.
    expect(await page.locator('#sessions tr[data-session-id="parent"] td.title').textContent()).toBe('plan the work')
    const hostile = page.locator('#sessions tr[data-session-id="hostile-title"] td.title')
    expect(await hostile.textContent()).toBe(HOSTILE_TITLE)
    expect(await hostile.locator('img, b').count()).toBe(0)
    expect(await page.evaluate(() => (globalThis as unknown as { dshPwned?: number }).dshPwned)).toBeUndefined()

    // The tree: labels, modes, activity, nesting and diagnostics.
    const oneShot = row('fresh-one-shot')
    expect(await oneShot.getAttribute('data-mode')).toBe('one-shot')
    expect(await oneShot.getAttribute('data-activity')).toBe('inactive')
    expect(await oneShot.locator('.label').textContent()).toBe('summarizer')
    const continuable = row('forked-continuable')
    expect(await continuable.getAttribute('data-mode')).toBe('continuable')
    expect(await continuable.getAttribute('data-activity')).toBe('running')
    expect(await continuable.locator(':scope > .row .label').textContent()).toBe('researcher')
    // The grandchild is nested inside its parent's item.
    expect(await continuable.locator('li[data-row-id="grandchild"]').count()).toBe(1)
    expect(await row('grandchild').locator('.label').textContent()).toBe('(no label)')
    expect(await row('broken-child').getAttribute('data-kind')).toBe('diagnostic')
    expect(await row('broken-child').getAttribute('data-reason')).toBe('corrupt')

    // A marker that a reload would wipe.
    await page.evaluate(() => ((globalThis as unknown as { dshMarker: number }).dshMarker = 42))
    const loadedBefore = await page.locator('#tree').getAttribute('data-loaded')

    stack.gates.release('forked-continuable')
    await row('forked-continuable').and(page.locator('[data-activity="inactive"]')).waitFor({ timeout: 10_000 })

    expect(await page.evaluate(() => (globalThis as unknown as { dshMarker?: number }).dshMarker)).toBe(42)
    expect(Number(await page.locator('#tree').getAttribute('data-loaded'))).toBeGreaterThan(Number(loadedBefore))

    // A child spawned while the page is open appears without a reload too.
    await stack.subagents.spawn('parent', { mode: 'one-shot', label: 'late arrival', context: 'fresh', prompt: 'late', id: 'late-child' })
      .done
    await row('late-child').and(page.locator('[data-activity="inactive"]')).waitFor({ timeout: 10_000 })
    expect(await page.evaluate(() => (globalThis as unknown as { dshMarker?: number }).dshMarker)).toBe(42)

    // Clicking a child shows its history, fetched through the parent's catalog.
    await row('fresh-one-shot').locator('.row').click()
    await page.locator('#history-events li', { hasText: 'finished summarize' }).first().waitFor()

    mkdirSync(outputDir, { recursive: true })
    const screenshot = join(outputDir, 'catalog-page.png')
    await page.screenshot({ path: screenshot, fullPage: true })
    expect(statSync(screenshot).size).toBeGreaterThan(1000)

    expect(failedRequests.filter((url) => !url.includes('/stream'))).toEqual([])
    expect(consoleErrors).toEqual([])
  }, 60_000)

  it('shows a typed error instead of data when the token is wrong', async () => {
    const response = await page.goto(`${stack.server.url}/?token=wrong-token-0123456789`)
    expect(response?.status()).toBe(401)
    expect(await page.locator('body').textContent()).toContain('API_UNAUTHORIZED')
  })
})
