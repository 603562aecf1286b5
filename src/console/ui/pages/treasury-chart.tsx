import type { CheckDetail } from "../../../treasury/history";
import { usdOfBaseUnits } from "../layout";

const WIDTH = 720;
const HEIGHT = 260;
const LEFT = 96;
const RIGHT = 16;
const TOP = 32;
/** The legend sits above the plot, clear of its lines. */
const LEGEND_Y = 12;
const BOTTOM = 40;

/** Base units as dollars, for positions on the chart only (the figures themselves stay exact bigints). */
const dollars = (units: string) => Number(BigInt(units)) / 1_000_000;

/** An axis label in dollars: "$1,250.00", "-$3.00". */
const axisUsd = (value: number) =>
  `${value < 0 ? "-" : ""}$${Math.abs(value).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

/** A round step (1, 2 or 5 times a power of ten) that cuts `range` into about four parts. */
function niceStep(range: number) {
  const rough = range / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const scaled = rough / power;
  return (scaled <= 1 ? 1 : scaled <= 2 ? 2 : scaled <= 5 ? 5 : 10) * power;
}

/** The dollar ticks of the y axis, around every value charted. */
function ticksAround(values: number[]) {
  let low = Math.min(...values);
  let high = Math.max(...values);
  if (high - low < 0.01) {
    // A flat history (all checks the same): a band of a dollar around it.
    low -= 1;
    high += 1;
  }
  const step = niceStep(high - low);
  const ticks: number[] = [];
  for (let t = Math.floor(low / step) * step; t <= Math.ceil(high / step) * step + step / 2; t += step) ticks.push(t);
  return ticks;
}

/**
 * The stored checks as a line chart, server-rendered SVG: what the chain held (holdings) against
 * what the ledger expected, oldest on the left, the y axis in dollars. Checks that found a
 * shortfall are marked red.
 */
export function TreasuryChart(props: { checks: CheckDetail[] }) {
  const checks = [...props.checks].reverse();
  const held = checks.map((c) => dollars(c.totalBaseUnits));
  const expected = checks.map((c) => dollars(c.expectedBaseUnits));
  const ticks = ticksAround([...held, ...expected]);
  const low = ticks[0]!;
  const high = ticks[ticks.length - 1]!;
  const plotWidth = WIDTH - LEFT - RIGHT;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const x = (i: number) => LEFT + (checks.length === 1 ? plotWidth / 2 : (i / (checks.length - 1)) * plotWidth);
  const y = (v: number) => TOP + plotHeight - ((v - low) / (high - low)) * plotHeight;
  const line = (values: number[]) => values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  const first = checks[0]!;
  const last = checks[checks.length - 1]!;
  return (
    <svg
      id="treasury-chart"
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      width="100%"
      role="img"
      aria-label="Holdings on chain against the ledger's expectation, in dollars, over the stored checks"
    >
      {ticks.map((t) => (
        <g>
          <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(t)} y2={y(t)} stroke="#e5e8ec" />
          <text x={LEFT - 6} y={y(t) + 4} font-size="11" text-anchor="end" fill="#5d6d7e" class="y-label">
            {axisUsd(t)}
          </text>
        </g>
      ))}
      <line x1={LEFT} x2={LEFT} y1={TOP} y2={TOP + plotHeight} stroke="#5d6d7e" />
      <line x1={LEFT} x2={WIDTH - RIGHT} y1={TOP + plotHeight} y2={TOP + plotHeight} stroke="#5d6d7e" />
      <text x={LEFT} y={HEIGHT - 22} font-size="11" fill="#5d6d7e">
        {`${first.at.slice(0, 16).replace("T", " ")} UTC`}
      </text>
      <text x={WIDTH - RIGHT} y={HEIGHT - 22} font-size="11" text-anchor="end" fill="#5d6d7e">
        {`${last.at.slice(0, 16).replace("T", " ")} UTC`}
      </text>
      <text x={LEFT + plotWidth / 2} y={HEIGHT - 6} font-size="11" text-anchor="middle" fill="#5d6d7e">
        {`${checks.length} checks, oldest to newest`}
      </text>
      <polyline
        id="chart-expected"
        points={line(expected)}
        fill="none"
        stroke="#9a6700"
        stroke-width="2"
        stroke-dasharray="6 4"
      />
      <polyline id="chart-holdings" points={line(held)} fill="none" stroke="#1f6feb" stroke-width="2" />
      {checks.map((c, i) => (
        <circle cx={x(i)} cy={y(held[i]!)} r="3" fill={c.status === "shortfall" ? "#cf222e" : "#1f6feb"}>
          <title>{`${c.at} block ${c.asOfBlock}: held ${usdOfBaseUnits(c.totalBaseUnits)}, expected ${usdOfBaseUnits(c.expectedBaseUnits)} (${c.status})`}</title>
        </circle>
      ))}
      <g font-size="11">
        <line x1={LEFT + 8} x2={LEFT + 28} y1={LEGEND_Y} y2={LEGEND_Y} stroke="#1f6feb" stroke-width="2" />
        <text x={LEFT + 32} y={LEGEND_Y + 4} fill="#17202a">
          Holdings on chain
        </text>
        <line
          x1={LEFT + 150}
          x2={LEFT + 170}
          y1={LEGEND_Y}
          y2={LEGEND_Y}
          stroke="#9a6700"
          stroke-width="2"
          stroke-dasharray="6 4"
        />
        <text x={LEFT + 174} y={LEGEND_Y + 4} fill="#17202a">
          Ledger expects
        </text>
      </g>
    </svg>
  );
}
