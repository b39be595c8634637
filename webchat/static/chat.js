// The chat page: get a Direct Line token from the bot's server, then render Web Chat with it.
// The token endpoint decides where the conversation goes (Azure's Direct Line or the bot's local
// one); this script only follows the `domain` it is given, and never sees a Direct Line secret.
(function () {
  'use strict';

  var config = JSON.parse(document.getElementById('chat-config').textContent);
  var statusEl = document.getElementById('status');
  var lang = (navigator.language || 'en').toLowerCase().indexOf('ja') === 0 ? 'ja' : 'en';

  // Every text of the page comes from the bot's catalog (hosting/ui_texts/catalog.toml), in both languages.
  var texts = config.texts;
  document.getElementById('hint-ja').textContent = texts.hint.ja;
  document.getElementById('hint-en').textContent = texts.hint.en;

  function showStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.className = isError ? 'status error' : 'status';
    statusEl.hidden = !text;
  }

  var styleOptions = {
    accent: '#2f5bea',
    backgroundColor: '#ffffff',
    primaryFont: "'Segoe UI', 'Hiragino Sans', 'Noto Sans JP', 'Yu Gothic UI', Meiryo, sans-serif",
    botAvatarInitials: 'AI',
    botAvatarBackgroundColor: '#2f5bea',
    userAvatarInitials: texts.me[lang],
    userAvatarBackgroundColor: '#5b6475',
    bubbleBackground: '#f1f3f9',
    bubbleBorderColor: '#e3e6ee',
    bubbleBorderRadius: 12,
    bubbleFromUserBackground: '#2f5bea',
    bubbleFromUserTextColor: '#ffffff',
    bubbleFromUserBorderRadius: 12,
    bubbleMaxWidth: 720,
    suggestedActionBorderRadius: 16,
    hideUploadButton: true,
    sendBoxHeight: 48,
    timestampFormat: 'relative'
  };

  function tokenError(response) {
    return response.json().then(
      function (body) { return new Error((body && body.error && body.error.message) || response.statusText); },
      function () { return new Error(response.status + ' ' + response.statusText); }
    );
  }

  function start() {
    if (!window.WebChat) {
      showStatus('Web Chat could not be loaded (/chat/webchat.js). Run ./run.sh to install it.', true);
      return Promise.resolve();
    }
    return fetch(config.tokenUrl, { method: 'POST', credentials: 'same-origin' })
      .then(function (response) {
        if (!response.ok) { return tokenError(response).then(function (e) { throw e; }); }
        return response.json();
      })
      .then(function (session) {
        var directLine = window.WebChat.createDirectLine({
          token: session.token,
          domain: session.domain,
          // Polling: works through every proxy, and is what the bot's local Direct Line speaks.
          webSocket: false,
          pollingInterval: 1000
        });
        var store = window.WebChat.createStore();
        window.WebChat.renderWebChat(
          {
            directLine: directLine,
            store: store,
            userID: session.userId,
            locale: lang === 'ja' ? 'ja-JP' : 'en-US',
            styleOptions: styleOptions
          },
          document.getElementById('webchat')
        );
        renderExamples(store);
      });
  }

  // Example questions as buttons: a click sends the question as if it had been typed.
  function renderExamples(store) {
    var box = document.getElementById('examples');
    (config.examples || []).forEach(function (text) {
      var button = document.createElement('button');
      button.type = 'button';
      button.textContent = text;
      button.addEventListener('click', function () {
        store.dispatch({ type: 'WEB_CHAT/SEND_MESSAGE', payload: { text: text } });
      });
      box.appendChild(button);
    });
  }

  start().catch(function (error) {
    showStatus(texts.start_failed[lang] + error.message, true);
  });
})();
