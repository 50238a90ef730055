/**
 * Browser test support (subpath `@dsh/test-kit/browser`; `playwright-core`
 * and `axe-core` are optional peers, loaded only here): Debian's headless
 * Chromium through playwright-core (never a downloaded browser), axe-core
 * evaluated from the installed package, and full-page screenshots.
 *
 * ```ts
 * const context = await launchChromium(profileDir)
 * const page = await context.newPage()
 * await page.goto(url)
 * expect(await seriousViolations(page)).toEqual([])
 * await screenshot(page, outDir, 'listing')
 * await context.close()
 * ```
 */
import { mkdirSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { type BrowserContext, chromium, type Page } from 'playwright-core'

/** Where Debian installs Chromium. */
export const CHROMIUM_PATH = '/usr/bin/chromium'

/**
 * A persistent headless Chromium context with a 1280×800 viewport. Every
 * wait and action allows 120 s (playwright's own default is 30 s): a timeout
 * only guards a hang, and a busy machine can take long to render a page.
 */
export async function launchChromium(userDataDir: string): Promise<BrowserContext> {
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
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
  context.setDefaultTimeout(120_000)
  return context
}

interface AxeViolation {
  readonly id: string
  readonly impact: string | null
  readonly help: string
  readonly nodes: readonly { readonly target: readonly string[] }[]
}

let axeSource: string | undefined

/**
 * axe-core's serious and critical violations on the page as it is, each with
 * the elements it names. Evaluated through the DevTools protocol, so a page
 * whose CSP refuses inline scripts (axe's included) is checked too.
 */
export async function seriousViolations(page: Page): Promise<string[]> {
  axeSource ??= readFileSync(join(createRequire(import.meta.url).resolve('axe-core'), '..', 'axe.min.js'), 'utf8')
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(axeSource)
  const violations = (await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } }).axe
    return (await axe.run()).violations
  })) as AxeViolation[]
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)
}

/** A full-page screenshot at `<dir>/<name>.png`; returns its path. Throws when the file is too small to hold a rendered page. */
export async function screenshot(page: Page, dir: string, name: string): Promise<string> {
  mkdirSync(dir, { recursive: true })
  const path = join(dir, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  const { size } = statSync(path)
  if (size <= 1000) throw new Error(`The screenshot ${path} is ${size} bytes: nothing was rendered.`)
  return path
}
