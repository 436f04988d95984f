// The page of `tf-transformer serve`: LibreTranslate's API from the same origin, no library.
"use strict";

const $ = (id) => document.getElementById(id);
let settings = null;
let pending = null; // the live translation's timer
let asked = 0; // the latest request: older answers are dropped

async function call(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function showError(message) {
  $("error").textContent = message || "";
}

async function translate() {
  const q = $("source").value;
  $("count").textContent = settings && settings.charLimit > 0
    ? `${q.length} / ${settings.charLimit}` : `${q.length}`;
  if (!q.trim()) {
    $("target").textContent = "";
    $("alternative-list").replaceChildren();
    showError("");
    return;
  }
  const number = ++asked;
  try {
    const answer = await call("translate", {
      q,
      source: settings.language.source.code,
      target: settings.language.target.code,
      format: "text",
      alternatives: Number($("alternatives").value) || 0,
    });
    if (number !== asked) return;
    $("target").textContent = answer.translatedText;
    $("alternative-list").replaceChildren(...(answer.alternatives || []).map((text) => {
      const item = document.createElement("li");
      item.textContent = text;
      return item;
    }));
    showError("");
  } catch (error) {
    if (number === asked) showError(error.message);
  }
}

function drawAttention(answer) {
  const canvas = $("attention");
  const context = canvas.getContext("2d");
  const heads = answer.weights;
  const rows = answer.target.length;
  const columns = answer.source.length;
  const left = 110;
  const top = 90;
  const cell = Math.max(8, Math.min(36, Math.floor(560 / Math.max(rows, columns, 1))));
  canvas.width = left + columns * cell + 10;
  canvas.height = top + rows * cell + 10;
  context.clearRect(0, 0, canvas.width, canvas.height);
  context.font = "12px sans-serif";
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) {
      let mean = 0;
      for (const head of heads) mean += head[r][c] / heads.length;
      const shade = Math.round(255 * (1 - mean));
      context.fillStyle = `rgb(${shade}, ${shade}, 255)`;
      context.fillRect(left + c * cell, top + r * cell, cell, cell);
    }
    context.fillStyle = "#222";
    context.textAlign = "right";
    context.fillText(answer.target[r], left - 6, top + r * cell + cell * 0.7);
  }
  for (let c = 0; c < columns; c++) {
    context.save();
    context.translate(left + c * cell + cell * 0.7, top - 6);
    context.rotate(-Math.PI / 3);
    context.textAlign = "left";
    context.fillText(answer.source[c], 0, 0);
    context.restore();
  }
  canvas.dataset.drawn = `${rows}x${columns}`;
}

async function plot() {
  const sentence = $("source").value.trim().split("\n")[0];
  if (!sentence) return;
  try {
    drawAttention(await call("attention", { q: sentence }));
    showError("");
  } catch (error) {
    showError(error.message);
  }
}

async function start() {
  try {
    settings = await call("frontend/settings");
  } catch (error) {
    showError(`The server did not answer: ${error.message}`);
    return;
  }
  $("model").textContent = settings.model;
  $("source-label").textContent = settings.language.source.name;
  $("target-label").textContent = settings.language.target.name;
  $("alternatives").max = settings.maxAlternatives;
  $("attention-section").hidden = !settings.attention;
  $("translate").addEventListener("click", translate);
  $("plot").addEventListener("click", plot);
  $("source").addEventListener("input", () => {
    if (!$("live").checked) return;
    clearTimeout(pending);
    pending = setTimeout(translate, settings.frontendTimeout);
  });
}

start();
