// omniprof's flamegraph page: draws the data host/profile/flamegraph.cpp
// writes (see flamegraph.h for its shape and why this is hand-written).
// Plain ES2017, no library, nothing fetched. Inlined into a <script>
// element: this file must never hold the characters that end one.
'use strict';
(function () {
  var scriptStart = performance.now();
  var ROW = 16;             // px per stack level
  var MIN_WIDTH_PX = 0.5;   // narrower frames (and their callees) are not drawn
  var DRAWN_LIST_SIZE = 100;

  var raw = JSON.parse(document.getElementById('profile-data').textContent);
  var strings = raw.strings;

  // Functions: name, file, type as string indexes; lines [line, samples, ...].
  var fnName = Int32Array.from(raw.functions.name);
  var fnFile = Int32Array.from(raw.functions.file);
  var fnType = Int32Array.from(raw.functions.type);
  var fnLines = raw.functions.lines;
  // Stack nodes in preorder: node i's subtree is [i, funcEnd[i]), parents
  // before children. ("func" in names below: a node, drawn as one box.)
  var funcParent = Int32Array.from(raw.nodes.parent);
  var funcEnd = Int32Array.from(raw.nodes.end);
  var funcFn = Int32Array.from(raw.nodes.func);
  var funcCount = funcParent.length;
  var funcDepth = new Int32Array(funcCount);
  for (var i = 1; i < funcCount; i++) funcDepth[i] = funcDepth[funcParent[i]] + 1;
  var sampleNode = Int32Array.from(raw.samples.node);
  var sampleLabels = Int32Array.from(raw.samples.labels);
  var sampleValue = Float64Array.from(raw.samples.value);
  var labelSets = raw.labelSets;  // [[key, value, key, value...]...] string indexes

  function funcName(f) { return strings[fnName[funcFn[f]]]; }
  function funcType(f) { return strings[fnType[funcFn[f]]]; }
  function funcFile(f) { return strings[fnFile[funcFn[f]]]; }

  // ---- Label filters -------------------------------------------------------
  // key -> Map(value string index -> samples), over the whole profile.
  var labelValues = new Map();
  (function () {
    var perSet = new Float64Array(labelSets.length);
    for (var s = 0; s < sampleValue.length; s++) perSet[sampleLabels[s]] += sampleValue[s];
    for (var l = 0; l < labelSets.length; l++) {
      var set = labelSets[l];
      for (var k = 0; k < set.length; k += 2) {
        var key = strings[set[k]];
        if (!labelValues.has(key)) labelValues.set(key, new Map());
        var values = labelValues.get(key);
        values.set(set[k + 1], (values.get(set[k + 1]) || 0) + perSet[l]);
      }
    }
  })();
  var filters = new Map();  // key -> value string (exact)

  function labelSetPasses() {
    var pass = new Uint8Array(labelSets.length);
    for (var l = 0; l < labelSets.length; l++) {
      var set = labelSets[l], ok = true;
      filters.forEach(function (value, key) {
        if (!ok) return;
        var found = false;
        for (var k = 0; k < set.length; k += 2) {
          if (strings[set[k]] === key && strings[set[k + 1]] === value) { found = true; break; }
        }
        ok = found;
      });
      pass[l] = ok ? 1 : 0;
    }
    return pass;
  }

  // ---- Weights under the current filters ------------------------------------
  var funcTotal = new Float64Array(funcCount), funcSelf = new Float64Array(funcCount);
  var funcX = new Float64Array(funcCount);

  function weigh() {
    var pass = labelSetPasses();
    funcSelf.fill(0);
    for (var s = 0; s < sampleNode.length; s++) {
      if (pass[sampleLabels[s]]) funcSelf[sampleNode[s]] += sampleValue[s];
    }
    funcTotal.set(funcSelf);
    for (var n = funcCount - 1; n > 0; n--) funcTotal[funcParent[n]] += funcTotal[n];
    // x of each node: its parent's x plus its elder siblings' totals
    // (preorder visits parents first and siblings in order; cursor[p]
    // starts at funcX[p], the root's at 0).
    var cursor = new Float64Array(funcCount);
    funcX[0] = 0;
    for (var f = 1; f < funcCount; f++) {
      var p = funcParent[f];
      funcX[f] = cursor[p];
      cursor[p] += funcTotal[f];
      cursor[f] = funcX[f];
    }
  }

  // ---- Search --------------------------------------------------------------
  var search = '';
  var matched = new Uint8Array(funcCount);
  var matchedShare = 0, matchedNames = 0;

  function applySearch() {
    matched.fill(0);
    matchedShare = 0;
    matchedNames = 0;
    if (!search) return;
    var needle = search.toLowerCase();
    var nameMatches = new Map();  // name string index -> bool
    for (var f = 1; f < funcCount; f++) {
      var nameIndex = fnName[funcFn[f]];
      var m = nameMatches.get(nameIndex);
      if (m === undefined) {
        m = strings[nameIndex].toLowerCase().indexOf(needle) >= 0;
        nameMatches.set(nameIndex, m);
      }
      if (m) matched[f] = 1;
    }
    // Samples with a matching frame: the outermost matches' totals (a match
    // inside a match is not counted twice), and distinct names with samples.
    var namesWithSamples = new Set();
    for (f = 1; f < funcCount; ) {
      if (matched[f] && funcTotal[f] > 0) {
        matchedShare += funcTotal[f];
        for (var g = f; g < funcEnd[f]; g++) {
          if (matched[g] && funcTotal[g] > 0) namesWithSamples.add(fnName[funcFn[g]]);
        }
        f = funcEnd[f];
      } else {
        f++;
      }
    }
    matchedNames = namesWithSamples.size;
  }

  // ---- Colours -------------------------------------------------------------
  var TYPE_HUES = { kernel: [40, 85, 52], native: [10, 70, 62], python: [210, 60, 62], ruby: [330, 55, 64], jit: [120, 45, 52] };
  function hash(s) {
    var h = 2166136261;
    for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  function typeHsl(type) {
    if (TYPE_HUES[type]) return TYPE_HUES[type];
    return [hash(type) % 360, 50, 60];  // any other plugin's type
  }
  var colourCache = new Map();
  function colour(f, faded) {
    var key = funcFn[f] * 2 + (faded ? 1 : 0);
    var c = colourCache.get(key);
    if (c) return c;
    if (f === 0 || funcType(f) === 'merged') {
      c = faded ? '#e8e8e8' : (f === 0 ? '#c8c8c8' : '#b0b0b0');
    } else {
      var hsl = typeHsl(funcType(f));
      var jitter = (hash(funcName(f)) % 13) - 6;  // neighbours differ a little
      c = faded ? 'hsl(' + hsl[0] + ',12%,' + Math.min(92, hsl[2] + 22) + '%)'
                : 'hsl(' + hsl[0] + ',' + hsl[1] + '%,' + (hsl[2] + jitter) + '%)';
    }
    colourCache.set(key, c);
    return c;
  }

  // ---- Drawing -------------------------------------------------------------
  var canvas = document.getElementById('flamegraph');
  var ctx = canvas.getContext('2d');
  var zoom = 0;          // function node shown full width
  var zoomHistory = [];
  var drawnByDepth = [];  // per depth: drawn function nodes, by x
  var view = { x0: 0, width: 1, scale: 1, cssWidth: 1 };

  function draw() {
    var cssWidth = Math.max(200, canvas.parentElement.clientWidth - 24);
    var x0 = funcX[zoom], w0 = funcTotal[zoom];
    if (w0 <= 0) { zoom = 0; x0 = 0; w0 = funcTotal[0]; }
    var scale = w0 > 0 ? cssWidth / w0 : 0;
    view = { x0: x0, width: w0, scale: scale, cssWidth: cssWidth };
    // Which frames: visible in [x0, x0 + w0) and at least MIN_WIDTH_PX wide;
    // a frame too narrow hides its whole subtree (a callee is no wider).
    drawnByDepth = [];
    var maxDepth = 0;
    var drawn = [];
    for (var f = 0; f < funcCount; ) {
      var tot = funcTotal[f];
      var left = Math.max(funcX[f], x0), right = Math.min(funcX[f] + tot, x0 + w0);
      if (tot <= 0 || right <= left || (right - left) * scale < MIN_WIDTH_PX) { f = funcEnd[f]; continue; }
      drawn.push(f);
      var d = funcDepth[f];
      (drawnByDepth[d] || (drawnByDepth[d] = [])).push(f);
      if (d > maxDepth) maxDepth = d;
      f++;
    }
    var ratio = window.devicePixelRatio || 1;
    var cssHeight = (maxDepth + 1) * ROW;
    canvas.style.height = cssHeight + 'px';
    canvas.width = Math.round(cssWidth * ratio);
    canvas.height = Math.round(cssHeight * ratio);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, cssWidth, cssHeight);
    ctx.font = '11px ui-monospace, Menlo, Consolas, monospace';
    ctx.textBaseline = 'middle';
    var charWidth = ctx.measureText('MMMMMMMMMM').width / 10;
    for (var k = 0; k < drawn.length; k++) {
      f = drawn[k];
      var l = (Math.max(funcX[f], x0) - x0) * scale;
      var r = (Math.min(funcX[f] + funcTotal[f], x0 + w0) - x0) * scale;
      var y = funcDepth[f] * ROW;
      var isMatch = search && matched[f];
      var outsideZoom = f < zoom && zoom < funcEnd[f];  // an ancestor of the zoomed frame
      ctx.fillStyle = colour(f, (search && !isMatch) || outsideZoom);
      ctx.fillRect(l, y, Math.max(r - l - 0.5, 0.5), ROW - 1);
      if (isMatch) {
        ctx.strokeStyle = '#000';
        ctx.lineWidth = 1;
        ctx.strokeRect(l + 0.5, y + 0.5, Math.max(r - l - 1.5, 0.5), ROW - 2);
      }
      var room = Math.floor((r - l - 6) / charWidth);
      if (room >= 3) {
        var name = funcName(f);
        var text = name.length <= room ? name : name.slice(0, room - 1) + '\u2026';
        ctx.fillStyle = '#000';
        ctx.fillText(text, l + 3, y + ROW / 2);
      }
    }
    updateStatus(drawn);
    updateDrawnList(drawn);
  }

  function percent(part, whole) { return whole > 0 ? (100 * part / whole) : 0; }
  function formatPercent(p) { return (p >= 10 ? p.toFixed(1) : p.toFixed(2)) + '%'; }
  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 'es'); }

  function updateStatus(drawn) {
    var total = funcTotal[0];
    var parts = [total + ' of ' + raw.total + ' samples'];
    var filterText = [];
    filters.forEach(function (value, key) { filterText.push(key + '=' + value); });
    if (filterText.length) parts.push('filter ' + filterText.join(', '));
    if (zoom !== 0) parts.push('zoomed to ' + funcName(zoom) + ' (' + formatPercent(percent(funcTotal[zoom], total)) + ')');
    parts.push(drawn.length + ' frames drawn');
    document.getElementById('view-status').textContent = parts.join('; ') + '.';
    var status = document.getElementById('search-status');
    if (search) {
      var share = percent(matchedShare, total);
      status.textContent = 'search "' + search + '": ' + plural(matchedNames, 'match') + ', ' +
                           formatPercent(share) + ' of samples';
      status.className = 'active';
      status.dataset.matches = String(matchedNames);
      status.dataset.share = share.toFixed(3);
    } else {
      status.textContent = '';
      status.className = '';
      delete status.dataset.matches;
      delete status.dataset.share;
    }
  }

  function updateDrawnList(drawn) {
    var largest = drawn.slice().sort(function (a, b) { return funcTotal[b] - funcTotal[a]; }).slice(0, DRAWN_LIST_SIZE);
    var list = document.getElementById('drawn-frames');
    var fragment = document.createDocumentFragment();
    for (var k = 0; k < largest.length; k++) {
      var f = largest[k];
      var item = document.createElement('li');
      item.textContent = funcName(f);
      item.dataset.type = funcType(f);
      item.dataset.samples = String(funcTotal[f]);
      item.dataset.self = String(funcSelf[f]);
      item.dataset.depth = String(funcDepth[f]);
      if (search && matched[f]) item.dataset.match = 'true';
      fragment.appendChild(item);
    }
    list.textContent = '';
    list.appendChild(fragment);
  }

  // ---- Hover ---------------------------------------------------------------
  var tooltip = document.getElementById('tooltip');
  function frameAt(clientX, clientY) {
    var rect = canvas.getBoundingClientRect();
    var depth = Math.floor((clientY - rect.top) / ROW);
    var row = drawnByDepth[depth];
    if (!row) return -1;
    var x = view.x0 + (clientX - rect.left) / view.scale;
    var lo = 0, hi = row.length - 1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1, f = row[mid];
      if (x < funcX[f]) hi = mid - 1;
      else if (x >= funcX[f] + funcTotal[f]) lo = mid + 1;
      else return f;
    }
    return -1;
  }

  function addRow(table, label, value) {
    var tr = table.insertRow();
    tr.insertCell().textContent = label;
    tr.insertCell().textContent = value;
  }

  function showTooltip(f, clientX, clientY) {
    var total = funcTotal[0];
    tooltip.textContent = '';
    var name = document.createElement('div');
    name.className = 'name';
    name.textContent = funcName(f);
    tooltip.appendChild(name);
    var table = document.createElement('table');
    if (f !== 0 && funcType(f) !== 'merged') {
      addRow(table, 'type', funcType(f));
      // The function's lines over the whole profile, most samples first.
      var lines = fnLines[funcFn[f]], lineTotal = 0;
      for (var k = 1; k < lines.length; k += 2) lineTotal += lines[k];
      var file = funcFile(f) || '(no file)';
      if (lines.length <= 2) {
        var only = lines.length ? lines[0] : 0;
        addRow(table, 'file:line', only > 0 ? file + ':' + only : file);
      } else {
        var shown = [];
        for (k = 0; k < lines.length && k < 12; k += 2) {
          shown.push((lines[k] > 0 ? lines[k] : '?') + ' (' + formatPercent(percent(lines[k + 1], lineTotal)) + ')');
        }
        addRow(table, 'file:line', file + ':' + shown.join(', ') +
               (lines.length > 12 ? ', ' + ((lines.length - 12) / 2) + ' more lines' : '') + ' (whole profile)');
      }
    }
    addRow(table, 'samples', funcTotal[f] + ' (' + formatPercent(percent(funcTotal[f], total)) + ' of all shown)');
    addRow(table, 'self', funcSelf[f] + ' (' + formatPercent(percent(funcSelf[f], total)) + ')');
    if (zoom !== 0) addRow(table, 'of zoomed', formatPercent(percent(funcTotal[f], funcTotal[zoom])));
    tooltip.appendChild(table);
    tooltip.hidden = false;
    var x = Math.min(clientX + 14, window.innerWidth - tooltip.offsetWidth - 8);
    var y = clientY + 18;
    if (y + tooltip.offsetHeight > window.innerHeight) y = clientY - tooltip.offsetHeight - 10;
    tooltip.style.left = Math.max(0, x) + 'px';
    tooltip.style.top = Math.max(0, y) + 'px';
  }

  canvas.addEventListener('mousemove', function (e) {
    var f = frameAt(e.clientX, e.clientY);
    if (f < 0) { tooltip.hidden = true; return; }
    showTooltip(f, e.clientX, e.clientY);
  });
  canvas.addEventListener('mouseleave', function () { tooltip.hidden = true; });
  canvas.addEventListener('click', function (e) {
    var f = frameAt(e.clientX, e.clientY);
    if (f < 0 || f === zoom) return;
    zoomHistory.push(zoom);
    zoom = f;
    draw();
  });

  // ---- Controls ------------------------------------------------------------
  var searchInput = document.getElementById('search');
  document.getElementById('back').addEventListener('click', function () {
    if (zoomHistory.length) { zoom = zoomHistory.pop(); draw(); }
  });
  document.getElementById('reset').addEventListener('click', function () {
    if (zoom !== 0) zoomHistory.push(zoom);
    zoom = 0;
    draw();
  });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && document.activeElement !== searchInput) document.getElementById('reset').click();
  });

  function updateHash() {
    var params = new URLSearchParams();
    if (search) params.set('search', search);
    filters.forEach(function (value, key) { params.set(key, value); });
    var text = params.toString();
    if (history.replaceState) {
      try { history.replaceState(null, '', text ? '#' + text : location.pathname + location.search); } catch (err) { /* file: URLs in some browsers */ }
    }
  }

  var searchTimer = 0;
  searchInput.addEventListener('input', function () {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(function () {
      search = searchInput.value;
      applySearch();
      updateHash();
      draw();
    }, 120);
  });

  function refilter() {
    weigh();
    applySearch();
    if (funcTotal[zoom] <= 0) { zoom = 0; zoomHistory = []; }
    updateHash();
    draw();
  }

  function buildFilters() {
    var container = document.getElementById('filters');
    var keys = Array.from(labelValues.keys()).sort();
    keys.forEach(function (key) {
      var label = document.createElement('label');
      label.appendChild(document.createTextNode(key + ' '));
      var select = document.createElement('select');
      select.dataset.key = key;
      var values = Array.from(labelValues.get(key).entries()).sort(function (a, b) { return b[1] - a[1]; });
      var all = document.createElement('option');
      all.value = '';
      all.textContent = 'all (' + values.length + ')';
      select.appendChild(all);
      values.forEach(function (e) {
        var option = document.createElement('option');
        option.value = strings[e[0]];
        option.textContent = strings[e[0]] + ' (' + formatPercent(percent(e[1], raw.total)) + ')';
        select.appendChild(option);
      });
      if (filters.has(key)) select.value = filters.get(key);
      select.addEventListener('change', function () {
        if (select.value === '') filters.delete(key); else filters.set(key, select.value);
        refilter();
      });
      label.appendChild(select);
      container.appendChild(label);
    });
  }

  function buildSummary() {
    var summary = document.getElementById('summary');
    var types = new Map();
    for (var f = 1; f < funcCount; f++) types.set(funcType(f), true);
    summary.textContent = raw.total + ' ' + raw.sampleType + ' in ' + sampleValue.length + ' distinct stacks and label sets, ' +
                          funcCount + ' stack nodes, ' + (fnName.length - 1) + ' functions. ';
    var details = document.createElement('details');
    var title = document.createElement('summary');
    title.textContent = 'What was merged';
    details.appendChild(title);
    var list = document.createElement('ul');
    list.id = 'merged';
    raw.merged.forEach(function (line) {
      var item = document.createElement('li');
      item.textContent = line;
      list.appendChild(item);
    });
    details.appendChild(list);
    summary.appendChild(details);
    var legend = document.getElementById('legend');
    legend.appendChild(document.createTextNode('Frame types:'));
    Array.from(types.keys()).sort().forEach(function (type) {
      var swatch = document.createElement('span');
      swatch.className = 'swatch';
      var hsl = typeHsl(type);
      swatch.style.background = type === 'merged' ? '#b0b0b0' : 'hsl(' + hsl[0] + ',' + hsl[1] + '%,' + hsl[2] + '%)';
      legend.appendChild(swatch);
      legend.appendChild(document.createTextNode(type));
    });
  }

  // The URL's #search=NAME&LABEL=VALUE: a link that opens the page searched
  // and filtered.
  var params = new URLSearchParams(location.hash.replace(/^#/, ''));
  params.forEach(function (value, key) {
    if (key === 'search') search = value;
    else if (labelValues.has(key)) filters.set(key, value);
  });
  searchInput.value = search;

  buildSummary();
  buildFilters();
  weigh();
  applySearch();
  draw();
  var renderMs = performance.now() - scriptStart;
  var renderTime = document.getElementById('render-time');
  renderTime.textContent = 'Drawn in ' + renderMs.toFixed(0) + ' ms.';
  renderTime.dataset.scriptMs = renderMs.toFixed(1);
  renderTime.dataset.sinceNavigationMs = performance.now().toFixed(1);
  document.body.dataset.rendered = 'true';

  var resizeFrame = 0;
  window.addEventListener('resize', function () {
    cancelAnimationFrame(resizeFrame);
    resizeFrame = requestAnimationFrame(draw);
  });
})();
